package load

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// compareTable is issue #30's table: each figure for istiod and
// baremeshd and their ratio (baremeshd / istiod).
func compareTable(theirs, ours *sideFigures) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tistiod\tbaremeshd\tratio")
	row := func(name string, t, o float64, format string) {
		r := "-"
		if t != 0 && theirs.skipped == "" {
			r = fmt.Sprintf("%.2f", o/t)
		}
		ts := "-"
		if theirs.skipped == "" {
			ts = fmt.Sprintf(format, t)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, ts, fmt.Sprintf(format, o), r)
	}
	sec := func(d time.Duration) float64 { return d.Seconds() }
	kb := func(n int64) float64 { return float64(n) / 1024 }
	row("new ServiceEntry: server CPU per proxy (ms)", theirs.newsvcCPUms, ours.newsvcCPUms, "%.2f")
	row("new ServiceEntry: write -> first proxy has the cluster (s)", sec(theirs.newsvcFirst), sec(ours.newsvcFirst), "%.3f")
	row("new ServiceEntry: write -> every proxy converged (s)", sec(theirs.newsvcAll), sec(ours.newsvcAll), "%.2f")
	row("new ServiceEntry: KB per proxy", kb(theirs.newsvcBytes()), kb(ours.newsvcBytes()), "%.0f")
	for _, t := range Types {
		row("  of which "+t.String(), kb(theirs.newsvc[t]), kb(ours.newsvc[t]), "%.0f")
	}
	row("endpoint edit: server CPU (s)", theirs.editCPU, ours.editCPU, "%.2f")
	row("endpoint edit: write -> every proxy ACKed (s)", sec(theirs.editAcked), sec(ours.editAcked), "%.2f")
	row("KB per proxy, initial", kb(theirs.initialBytes()), kb(ours.initialBytes()), "%.0f")
	for _, t := range Types {
		row("  of which "+t.String(), kb(theirs.initial[t]), kb(ours.initial[t]), "%.0f")
	}
	row("configure all: slowest proxy (s)", sec(theirs.configured), sec(ours.configured), "%.1f")
	row("configure all: server CPU (s)", theirs.connectCPU, ours.connectCPU, "%.1f")
	row("RSS idle (MB)", theirs.rssIdle, ours.rssIdle, "%.0f")
	row("RSS steady (MB)", theirs.rssSteady, ours.rssSteady, "%.0f")
	row("RSS peak (MB)", theirs.rssPeak, ours.rssPeak, "%.0f")
	row("NACKs", float64(theirs.nacks), float64(ours.nacks), "%.0f")
	row("reconnects", float64(theirs.reconnects), float64(ours.reconnects), "%.0f")
	_ = tw.Flush()
	if theirs.skipped != "" {
		b.WriteString(theirs.skipped + "\n")
	}
	return b.String()
}

// inventory is one proxy's resources of one type: their encoded sizes
// by name, and each one's bytes under each field path (down to ten
// levels, through Any).
type inventory struct {
	sizes map[string]int
	paths map[string]map[string]int
}

func takeInventory(v View) [numTypes]inventory {
	var out [numTypes]inventory
	for _, t := range Types {
		inv := inventory{sizes: map[string]int{}, paths: map[string]map[string]int{}}
		s := v.Set(t)
		for _, n := range s.Names() {
			r := s.Get(n)
			wire, err := proto.MarshalOptions{Deterministic: true}.Marshal(r.Msg)
			if err != nil {
				continue
			}
			inv.sizes[n] = len(wire)
			inv.paths[n] = map[string]int{}
			walk(wire, r.Msg.ProtoReflect().Descriptor(), "", 10, inv.paths[n])
		}
		out[t] = inv
	}
	return out
}

// walk adds the bytes of every field of the message md encoded in b to
// sizes under its path, descending depth levels into messages and
// through Any into the message it holds.
func walk(b []byte, md protoreflect.MessageDescriptor, prefix string, depth int, sizes map[string]int) {
	if md.FullName() == "google.protobuf.Any" {
		var url string
		var value []byte
		each(b, func(num protowire.Number, v []byte, n int) {
			switch num {
			case 1:
				url = string(v)
			case 2:
				value = v
			}
		})
		mt, err := protoregistry.GlobalTypes.FindMessageByURL(url)
		if err != nil {
			return
		}
		walk(value, mt.Descriptor(), prefix+"("+string(mt.Descriptor().Name())+")", depth, sizes)
		return
	}
	each(b, func(num protowire.Number, v []byte, n int) {
		fd := md.Fields().ByNumber(num)
		name := fmt.Sprint(num)
		if fd != nil {
			name = string(fd.Name())
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		sizes[path] += n
		if depth > 1 && fd != nil && fd.Message() != nil && !fd.IsMap() && v != nil {
			walk(v, fd.Message(), path, depth-1, sizes)
		}
	})
}

// each calls fn with every field of the encoded message b: its number,
// its bytes if length-delimited, and its encoded size with tag.
func each(b []byte, fn func(num protowire.Number, v []byte, n int)) {
	for len(b) > 0 {
		num, typ, tn := protowire.ConsumeTag(b)
		if tn < 0 {
			return
		}
		var v []byte
		var vn int
		if typ == protowire.BytesType {
			v, vn = protowire.ConsumeBytes(b[tn:])
		} else {
			vn = protowire.ConsumeFieldValue(num, typ, b[tn:])
		}
		if vn < 0 {
			return
		}
		fn(num, v, tn+vn)
		b = b[tn+vn:]
	}
}

// compareInventories says, per type, how one proxy's resources from
// istiod and from baremeshd differ: counts and bytes, the resources only
// one side sends, and, over the resources both send, the field paths
// whose bytes differ most.
func compareInventories(theirs, ours [numTypes]inventory) string {
	var b strings.Builder
	for _, t := range Types {
		ti, oi := theirs[t], ours[t]
		fmt.Fprintf(&b, "%s: istiod %d resources, %d bytes; baremeshd %d resources, %d bytes (%+d)\n",
			t, len(ti.sizes), total(ti.sizes), len(oi.sizes), total(oi.sizes), total(oi.sizes)-total(ti.sizes))
		onlyT, onlyO := only(ti.sizes, oi.sizes), only(oi.sizes, ti.sizes)
		if len(onlyT) > 0 {
			fmt.Fprintf(&b, "  only istiod sends %d (%d bytes): %s\n", len(onlyT), sumOf(ti.sizes, onlyT), examples(onlyT))
		}
		if len(onlyO) > 0 {
			fmt.Fprintf(&b, "  only baremeshd sends %d (%d bytes): %s\n", len(onlyO), sumOf(oi.sizes, onlyO), examples(onlyO))
		}
		type delta struct {
			path   string
			t, o   int
			absDif int
		}
		tp, op := map[string]int{}, map[string]int{}
		var common int
		for n, m := range ti.paths {
			if om, ok := oi.paths[n]; ok {
				common++
				for p, v := range m {
					tp[p] += v
				}
				for p, v := range om {
					op[p] += v
				}
			}
		}
		fmt.Fprintf(&b, "  the %d both send: istiod %d bytes, baremeshd %d bytes (%+d)\n",
			common, total(ti.sizes)-sumOf(ti.sizes, onlyT), total(oi.sizes)-sumOf(oi.sizes, onlyO),
			total(oi.sizes)-sumOf(oi.sizes, onlyO)-total(ti.sizes)+sumOf(ti.sizes, onlyT))
		var ds []delta
		for _, p := range union(tp, op) {
			d := op[p] - tp[p]
			if d != 0 {
				ds = append(ds, delta{p, tp[p], op[p], max(d, -d)})
			}
		}
		// A path whose difference is (nearly: the length prefixes of the
		// nested messages differ too) all in one of its fields says
		// nothing that field does not: keep the deepest.
		byPath := map[string]int{}
		for _, d := range ds {
			byPath[d.path] = d.o - d.t
		}
		ds = slices.DeleteFunc(ds, func(d delta) bool {
			for p, v := range byPath {
				if p == d.path || !(strings.HasPrefix(p, d.path+".") || strings.HasPrefix(p, d.path+"(")) || (v > 0) != (d.o > d.t) {
					continue
				}
				if rest := d.absDif - max(v, -v); rest >= 0 && rest <= max(8, d.absDif/10) {
					return true
				}
			}
			return false
		})
		slices.SortFunc(ds, func(a, c delta) int {
			return cmp.Or(cmp.Compare(c.absDif, a.absDif), strings.Compare(a.path, c.path))
		})
		for _, d := range ds[:min(len(ds), 15)] {
			fmt.Fprintf(&b, "  %-90s istiod %9d  baremeshd %9d  (%+d)\n", d.path, d.t, d.o, d.o-d.t)
		}
	}
	return b.String()
}

func total(m map[string]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

func sumOf(m map[string]int, keys []string) (n int) {
	for _, k := range keys {
		n += m[k]
	}
	return n
}

// only lists the keys of a missing from b, sorted.
func only(a, b map[string]int) []string {
	var out []string
	for k := range a {
		if _, ok := b[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func union(a, b map[string]int) []string {
	var out []string
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func examples(names []string) string {
	if len(names) > 8 {
		return strings.Join(names[:8], ", ") + fmt.Sprintf(", … (%d more)", len(names)-8)
	}
	return strings.Join(names, ", ")
}
