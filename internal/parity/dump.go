package parity

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Bytes is the encoded size of each type's resources (the sum of their
// proto sizes, as a SotW response carries them).
func (r Resources) Bytes() map[string]int {
	out := map[string]int{}
	for typ, m := range r {
		for _, msg := range m {
			out[typ] += proto.Size(msg)
		}
	}
	return out
}

// Dump writes r as indented protojson (Any bodies expanded where the type
// is known), one file per type, to dir/<side>-<type>.json: the raw
// resources before normalization, for reading what a side sent
// (PARITY_DUMP=DIR).
func (n *Normalizer) Dump(dir, side string, r Resources) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("dump: %w", err)
	}
	for typ, m := range r {
		names := make([]string, 0, len(m))
		for name := range m {
			names = append(names, name)
		}
		sort.Strings(names)
		var b strings.Builder
		for _, name := range names {
			j, err := protojson.MarshalOptions{UseProtoNames: true, Multiline: true, Resolver: &n.res}.Marshal(m[name])
			if err != nil {
				return fmt.Errorf("dump %s %s/%s: %w", side, typ, name, err)
			}
			fmt.Fprintf(&b, "# %s\n%s\n", name, j)
		}
		if err := os.WriteFile(filepath.Join(dir, side+"-"+typ+".json"), []byte(b.String()), 0o644); err != nil {
			return fmt.Errorf("dump: %w", err)
		}
	}
	return nil
}
