package istioconfig

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"
	mcpapi "istio.io/api/mcp/v1alpha1"

	"github.com/baremesh/baremesh/core/config"
)

// encode makes one config's MCP metadata and body as istiod's own MCP
// server does (PilotConfigToResource: name, create_time, version,
// labels, annotations). istiod's config source client rewrites a
// resource whose version differs from the one it holds, or is empty,
// and orders conflicting rules by creation time, so:
//
//   - version is a hash of the content (spec, labels, annotations): it
//     moves exactly when the content does, whatever the source (a file
//     has no resource version; a Kubernetes or MCP one also moves on
//     status-only changes, which are not content here);
//   - create_time is the config's CreationTime (its source's, or when
//     the file source first saw it), left out when unknown.
//
// The spec is encoded deterministically (map fields in key order), once,
// for both the body and the hash.
func encode(c *config.Config) (*mcpapi.Metadata, *anypb.Any, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c.Spec)
	if err != nil {
		return nil, nil, err
	}
	body := &anypb.Any{TypeUrl: "type.googleapis.com/" + string(c.Spec.ProtoReflect().Descriptor().FullName()), Value: b}
	md := &mcpapi.Metadata{
		Name: c.Namespace + "/" + c.Name, Labels: c.Labels, Annotations: c.Annotations,
		Version: contentVersion(b, c.Labels, c.Annotations),
	}
	if !c.CreationTime.IsZero() {
		md.CreateTime = timestamppb.New(c.CreationTime)
	}
	return md, body, nil
}

// contentVersion hashes an encoded spec with labels and annotations (in
// key order), each part length-prefixed so that no two contents meet.
func contentVersion(spec []byte, labels, annotations map[string]string) string {
	h := sha256.New()
	var n [8]byte
	count := func(l int) {
		binary.LittleEndian.PutUint64(n[:], uint64(l))
		h.Write(n[:])
	}
	write := func(b []byte) {
		count(len(b))
		h.Write(b)
	}
	write(spec)
	for _, m := range []map[string]string{labels, annotations} {
		keys := slices.Sorted(maps.Keys(m))
		count(len(keys))
		for _, k := range keys {
			write([]byte(k))
			write([]byte(m[k]))
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}
