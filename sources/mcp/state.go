package mcp

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/store"
)

// response is one answer of the upstream for one type URL, in either
// protocol.
type response struct {
	typeURL string
	nonce   string
	version string
	// full: items are the whole state of the type (SotW).
	full    bool
	items   []item
	removed []string // Delta: names no longer held
}

// item is one resource of a response.
type item struct {
	name    string // transport name ("ns/name"), Delta only
	version string
	res     *anypb.Any
}

type held struct {
	cfg     config.Config
	version string // the upstream's version of the resource (Delta)
}

// typeState is what one upstream holds of one type URL.
type typeState struct {
	kind      config.Kind
	byName    map[string]held // by the upstream's "ns/name"
	responded bool            // answered at least once since Run started
}

// state is an upstream's last good state and its problems; it is owned
// by the Upstream's Run goroutine.
type state struct {
	source string // "mcp:NAME", in each Config's Source
	types  map[string]*typeState
	// problems by resource key ("ServiceEntry/ns/name") or by type URL.
	problems map[string]store.Problem
}

func newState(source string, typeURLs []string) *state {
	s := &state{source: source, types: map[string]*typeState{}, problems: map[string]store.Problem{}}
	for _, u := range typeURLs {
		sc, _, _ := parseTypeURL(u)
		s.types[u] = &typeState{kind: sc.Kind, byName: map[string]held{}}
	}
	return s
}

// versions returns the upstream's version of every resource held of
// typeURL, for a Delta resubscription.
func (s *state) versions(typeURL string) map[string]string {
	ts := s.types[typeURL]
	if ts == nil || len(ts.byName) == 0 {
		return nil
	}
	out := make(map[string]string, len(ts.byName))
	for n, h := range ts.byName {
		out[n] = h.version
	}
	return out
}

// maxNACKNames bounds the resources a NACK's message lists.
const maxNACKNames = 20

// apply decodes r and folds it into the state. It returns the changes
// for the sink (nothing for a resource whose content did not change) and,
// when some resource was refused, the NACK error naming them. Refused
// resources keep their last good version.
func (s *state) apply(r *response, now time.Time) (ups []config.Config, dels []config.Key, nack error) {
	ts := s.types[r.typeURL]
	if ts == nil {
		err := fmt.Errorf("%w %q: not subscribed (subscribed: %s)", ErrUnknownType, r.typeURL, strings.Join(s.typeURLs(), ", "))
		s.problems[r.typeURL] = store.Problem{Resource: r.typeURL, Error: err.Error(), Since: now}
		return nil, nil, err
	}
	ts.responded = true
	delete(s.problems, r.typeURL)
	var (
		bad      []string
		seen     = make(map[string]bool, len(r.items)) // upstream names
		labels   = make(map[string]bool, len(r.items)) // problem keys
		nameless bool
	)
	for _, it := range r.items {
		c, name, err := Decode(r.typeURL, it.res, it.name, s.source)
		if it.name != "" {
			// Delta removes by the transport's name: hold by it.
			name = it.name
		}
		if err != nil {
			var label string
			if name == "" {
				nameless = true
				label = fmt.Sprintf("%s (unnamed resource #%d)", ts.kind, len(bad)+1)
			} else {
				seen[name] = true
				label = keyOf(ts.kind, name).String()
				labels[label] = true
			}
			bad = append(bad, label+": "+err.Error())
			if p, ok := s.problems[label]; !ok || p.Error != err.Error() {
				s.problems[label] = store.Problem{Resource: label, Error: err.Error(), Since: now}
			}
			continue
		}
		seen[name] = true
		label := c.Key().String()
		delete(s.problems, label)
		if old, ok := ts.byName[name]; !ok || !config.SameContent(&old.cfg, &c) {
			ups = append(ups, c)
		}
		ts.byName[name] = held{cfg: c, version: it.version}
	}
	var gone []string
	if r.full && !nameless {
		// A resource that could not even be named might be any of the
		// held ones: delete nothing on such a response.
		for n := range ts.byName {
			if !seen[n] {
				gone = append(gone, n)
			}
		}
	}
	gone = append(gone, r.removed...)
	for _, n := range gone {
		if h, ok := ts.byName[n]; ok {
			delete(ts.byName, n)
			dels = append(dels, h.cfg.Key())
		}
		delete(s.problems, keyOf(ts.kind, n).String())
	}
	if r.full {
		// Problems of resources the upstream no longer sends are over.
		for k := range s.problems {
			switch {
			case strings.HasPrefix(k, string(ts.kind)+"/") && !labels[k]:
				delete(s.problems, k)
			case strings.HasPrefix(k, string(ts.kind)+" (unnamed") && !nameless:
				delete(s.problems, k)
			}
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		msg := bad
		if len(msg) > maxNACKNames {
			msg = append(msg[:maxNACKNames:maxNACKNames], fmt.Sprintf("and %d more", len(bad)-maxNACKNames))
		}
		nack = fmt.Errorf("%d of %d resources refused, the others applied: %s", len(bad), len(r.items), strings.Join(msg, "; "))
	}
	return ups, dels, nack
}

func (s *state) typeURLs() []string {
	out := make([]string, 0, len(s.types))
	for u := range s.types {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

// counts returns the resources held per kind.
func (s *state) counts() map[string]int {
	out := map[string]int{}
	for _, ts := range s.types {
		out[string(ts.kind)] += len(ts.byName)
	}
	return out
}

// allResponded reports whether every type has been answered.
func (s *state) allResponded() bool {
	for _, ts := range s.types {
		if !ts.responded {
			return false
		}
	}
	return true
}

var errNoResponse = errors.New("no response")
