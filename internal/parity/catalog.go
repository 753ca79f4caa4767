package parity

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Entry is one explained difference: a path pattern and the proxies and
// scenarios it applies to.
type Entry struct {
	ID string `json:"id"`
	// Paths are patterns over Difference.Path; "*" matches any run of
	// characters (slashes and dots included). One is enough to match.
	Paths []string `json:"paths"`
	// Proxies are proxy kinds (sidecar, gateway, router, grpc-client,
	// grpc-server); empty means every kind.
	Proxies []string `json:"proxies,omitempty"`
	// Scenarios limits the entry to scenarios by name pattern; empty
	// means every scenario.
	Scenarios []string `json:"scenarios,omitempty"`
	// IstiodValue and OursValue, when set, are regular expressions the
	// compact JSON of each side's value must match (Absent for a missing
	// side): an entry about an explicit default names the default.
	IstiodValue string `json:"istiodValue,omitempty"`
	OursValue   string `json:"oursValue,omitempty"`
	// Deliberate entries: what we do instead and why that is safe.
	Ours string `json:"ours,omitempty"`
	Why  string `json:"why,omitempty"`
	// Open entries: what istiod does, what we do, where in our code.
	Analysis string `json:"analysis,omitempty"`

	paths, scenarios []*regexp.Regexp
	istiod, ours     *regexp.Regexp
}

// Catalog is catalog.yaml: deliberate differences (safe, with the reason)
// and open ones (bugs not fixed yet, counted apart; the target is none).
type Catalog struct {
	Deliberate []*Entry `json:"deliberate"`
	Open       []*Entry `json:"open"`
}

// LoadCatalog reads and checks a catalog file.
func LoadCatalog(path string) (*Catalog, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	var c Catalog
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return nil, fmt.Errorf("catalog %s: %w", path, err)
	}
	ids := map[string]bool{}
	for _, list := range [][]*Entry{c.Deliberate, c.Open} {
		for _, e := range list {
			if e.ID == "" || len(e.Paths) == 0 {
				return nil, fmt.Errorf("catalog %s: entry %q: id and paths are required", path, e.ID)
			}
			if ids[e.ID] {
				return nil, fmt.Errorf("catalog %s: id %q listed twice", path, e.ID)
			}
			ids[e.ID] = true
			for _, p := range e.Paths {
				e.paths = append(e.paths, glob(p))
			}
			for _, v := range []struct {
				expr string
				re   **regexp.Regexp
			}{{e.IstiodValue, &e.istiod}, {e.OursValue, &e.ours}} {
				if v.expr == "" {
					continue
				}
				re, err := regexp.Compile("^(?:" + v.expr + ")$")
				if err != nil {
					return nil, fmt.Errorf("catalog %s: entry %q: value pattern: %w", path, e.ID, err)
				}
				*v.re = re
			}
			for _, s := range e.Scenarios {
				e.scenarios = append(e.scenarios, glob(s))
			}
		}
	}
	for _, e := range c.Deliberate {
		if e.Ours == "" || e.Why == "" {
			return nil, fmt.Errorf("catalog %s: deliberate entry %q: ours and why are required", path, e.ID)
		}
	}
	for _, e := range c.Open {
		if e.Analysis == "" {
			return nil, fmt.Errorf("catalog %s: open entry %q: analysis is required", path, e.ID)
		}
	}
	return &c, nil
}

func glob(p string) *regexp.Regexp {
	return regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(p), `\*`, ".*") + "$")
}

func (e *Entry) matches(scenario, kind string, d Difference) bool {
	if (e.istiod != nil && !e.istiod.MatchString(d.Istiod)) || (e.ours != nil && !e.ours.MatchString(d.Ours)) {
		return false
	}
	path := d.Path
	if len(e.Proxies) > 0 && !slices.Contains(e.Proxies, kind) {
		return false
	}
	if len(e.scenarios) > 0 && !slices.ContainsFunc(e.scenarios, func(r *regexp.Regexp) bool { return r.MatchString(scenario) }) {
		return false
	}
	return slices.ContainsFunc(e.paths, func(r *regexp.Regexp) bool { return r.MatchString(path) })
}

// Class is how a difference is explained.
type Class int

// The classes, in the order reports count them.
const (
	Unexplained Class = iota
	Deliberate
	Open
)

// Classify finds the first entry (deliberate before open) matching a
// difference seen by a proxy of kind in scenario.
func (c *Catalog) Classify(scenario, kind string, d Difference) (Class, *Entry) {
	for _, e := range c.Deliberate {
		if e.matches(scenario, kind, d) {
			return Deliberate, e
		}
	}
	for _, e := range c.Open {
		if e.matches(scenario, kind, d) {
			return Open, e
		}
	}
	return Unexplained, nil
}
