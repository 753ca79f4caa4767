package iptables

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// installed is what iptables-save shows of our rules in one table. The
// lines are in iptables-save's own (normalised) spelling.
type installed struct {
	chains []string // our chains
	rules  []string // "-A OURCHAIN ..."
	jumps  []string // rules of other chains whose target is one of ours
}

// parseSave extracts our chains and the rules that touch them from an
// iptables-save output, per table. Everything else is ignored.
func parseSave(out, prefix string) map[string]*installed {
	ours := func(chain string) bool { return strings.HasPrefix(chain, prefix+"_") }
	tables := map[string]*installed{}
	var cur *installed
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == '#' || line == "COMMIT":
		case line[0] == '*':
			cur = &installed{}
			tables[line[1:]] = cur
		case cur == nil:
		case line[0] == ':':
			name, _, _ := strings.Cut(line[1:], " ")
			if ours(name) {
				cur.chains = append(cur.chains, name)
			}
		case strings.HasPrefix(line, "-A "):
			fields := strings.Fields(line)
			if len(fields) < 2 {
				continue
			}
			if ours(fields[1]) {
				cur.rules = append(cur.rules, line)
			} else if target := ruleTarget(fields); target != "" && ours(target) {
				cur.jumps = append(cur.jumps, line)
			}
		}
	}
	for name, t := range tables {
		if len(t.chains) == 0 && len(t.jumps) == 0 {
			delete(tables, name)
		}
	}
	return tables
}

func ruleTarget(fields []string) string {
	for i := 0; i+1 < len(fields); i++ {
		if fields[i] == "-j" || fields[i] == "-g" {
			return fields[i+1]
		}
	}
	return ""
}

// fingerprint is a canonical text of our installed rules, compared after
// apply and on each check to detect drift.
func fingerprint(tables map[string]*installed) string {
	names := make([]string, 0, len(tables))
	for n := range tables {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		t := tables[n]
		fmt.Fprintf(&b, "*%s\n", n)
		for _, c := range t.chains {
			fmt.Fprintf(&b, ":%s\n", c)
		}
		for _, l := range t.rules {
			b.WriteString(l + "\n")
		}
		for _, l := range t.jumps {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// asTables turns an installed snapshot back into desired tables, so that
// a failed apply can restore exactly what was there before.
func asTables(snap map[string]*installed) []Table {
	var out []Table
	for name, t := range snap {
		out = append(out, Table{Name: name, Chains: t.chains, Rules: t.rules, Jumps: t.jumps})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// transition returns the iptables-restore --noflush payload that turns the
// current state of our chains into desired, touching nothing else: desired
// chains are declared (created or flushed) and refilled, jumps are added
// only when missing and deleted when unwanted or duplicated, and our
// chains that are no longer wanted are flushed and deleted. The payload is
// empty when there is nothing to install or remove.
func transition(desired []Table, current map[string]*installed) string {
	var names []string
	want := map[string]Table{}
	for _, t := range desired {
		want[t.Name] = t
		names = append(names, t.Name)
	}
	for n := range current {
		if _, ok := want[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names[len(desired):])
	var b strings.Builder
	for _, n := range names {
		d, cur := want[n], current[n]
		if cur == nil {
			cur = &installed{}
		}
		var stale []string
		for _, c := range cur.chains {
			if !slices.Contains(d.Chains, c) {
				stale = append(stale, c)
			}
		}
		fmt.Fprintf(&b, "*%s\n", n)
		for _, c := range d.Chains {
			fmt.Fprintf(&b, ":%s - [0:0]\n", c)
		}
		for _, c := range stale {
			fmt.Fprintf(&b, ":%s - [0:0]\n", c)
		}
		keep := map[string]bool{}
		for _, j := range cur.jumps {
			if slices.Contains(d.Jumps, j) && !keep[j] {
				keep[j] = true
				continue
			}
			b.WriteString("-D" + strings.TrimPrefix(j, "-A") + "\n")
		}
		for _, l := range d.Rules {
			b.WriteString(l + "\n")
		}
		for _, j := range d.Jumps {
			if !keep[j] {
				b.WriteString(j + "\n")
			}
		}
		for _, c := range stale {
			fmt.Fprintf(&b, "-X %s\n", c)
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}
