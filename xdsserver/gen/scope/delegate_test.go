package scope

import (
	"testing"

	networking "istio.io/api/networking/v1alpha3"
)

// TestDelegateMatchConflict: a delegate's string match must narrow the
// root's (istiod's stringMatchConflict): under a prefix, a longer prefix
// or an exact value below it; under an exact value, only that value; a
// regex on either side goes with nothing else; an unset side never
// conflicts.
func TestDelegateMatchConflict(t *testing.T) {
	prefix := func(s string) *networking.StringMatch {
		return &networking.StringMatch{MatchType: &networking.StringMatch_Prefix{Prefix: s}}
	}
	exact := func(s string) *networking.StringMatch {
		return &networking.StringMatch{MatchType: &networking.StringMatch_Exact{Exact: s}}
	}
	regex := func(s string) *networking.StringMatch {
		return &networking.StringMatch{MatchType: &networking.StringMatch_Regex{Regex: s}}
	}
	for _, c := range []struct {
		name       string
		root, sub  *networking.StringMatch
		conflicted bool
	}{
		{"longer prefix", prefix("/a"), prefix("/a/b"), false},
		{"shorter prefix", prefix("/a/b"), prefix("/a"), true},
		{"exact under prefix", prefix("/a"), exact("/a/x"), false},
		{"exact elsewhere", prefix("/a"), exact("/b"), true},
		{"same exact", exact("/a"), exact("/a"), false},
		{"prefix under exact", exact("/a"), prefix("/a"), true},
		{"regex under prefix", prefix("/a"), regex("/a.*"), true},
		{"root unset", nil, prefix("/x"), false},
		{"delegate unset", prefix("/x"), nil, false},
	} {
		if got := stringConflict(c.root, c.sub); got != c.conflicted {
			t.Errorf("%s: conflict %v, want %v", c.name, got, c.conflicted)
		}
	}
	// A delegate route whose only match conflicts is dropped; one without
	// a match takes the root's.
	root := &networking.HTTPRoute{Match: []*networking.HTTPMatchRequest{{Uri: prefix("/r")}}}
	if m := mergeRoute(root, &networking.HTTPRoute{Match: []*networking.HTTPMatchRequest{{Uri: prefix("/other")}}}); m != nil {
		t.Errorf("conflicting delegate route kept: %v", m)
	}
	if m := mergeRoute(root, &networking.HTTPRoute{}); m == nil || m.GetMatch()[0].GetUri().GetPrefix() != "/r" {
		t.Errorf("delegate route without a match: %v, want the root's match", m)
	}
}
