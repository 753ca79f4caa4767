// Package jwks owns the JSON Web Key Sets that RequestAuthentication
// jwtRules name by jwksUri (or, without one, by their issuer's OpenID
// discovery document), which baremeshd fetches and inlines into the
// proxies' jwt_authn filters, as istiod does by default
// (PILOT_JWT_ENABLE_REMOTE_JWKS=false): the immutable Set a snapshot
// carries, the Fetcher that keeps it fresh (cache, refresh, size limit,
// timeouts; the last good keys stay when a fetch fails), and the
// sources a set of RequestAuthentications wants. Translation reads only
// the Set (xdsserver/gen/authz); the Fetcher is I/O, run by the daemon
// beside the push pipeline, and a key change queues a push.
//
// It imports only core/config of ours.
package jwks

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	security "istio.io/api/security/v1beta1"

	"github.com/baremesh/baremesh/core/config"
)

// Source is one key set to fetch: a jwksUri, or (URI empty) the
// jwks_uri of Issuer's OpenID discovery document.
type Source struct {
	URI    string
	Issuer string
}

func (s Source) String() string {
	if s.URI != "" {
		return s.URI
	}
	return "issuer " + s.Issuer + " (OpenID discovery)"
}

// Entry is the state of one source.
type Entry struct {
	// Keys is the last good key set (JSON), "" if none was ever fetched.
	Keys string
	// Fetched is when Keys was fetched.
	Fetched time.Time
	// Err is why the latest fetch failed (nil: it did not).
	Err error
	// Since is when fetches started failing (zero while Err is nil).
	Since time.Time
}

// Set is the key sets of one snapshot. It is never altered once made;
// a nil *Set holds nothing.
type Set struct {
	entries map[Source]Entry
}

// NewSet makes a set of entries (taken, not copied).
func NewSet(entries map[Source]Entry) *Set { return &Set{entries: entries} }

// Keys returns the last good keys of uri (or of issuer's discovery when
// uri is empty); ok is false when none were ever fetched.
func (s *Set) Keys(uri, issuer string) (keys string, ok bool) {
	if s == nil {
		return "", false
	}
	k := Source{URI: uri}
	if uri == "" {
		k.Issuer = issuer
	}
	e := s.entries[k]
	return e.Keys, e.Keys != ""
}

// Entry returns the state of src.
func (s *Set) Entry(src Source) (Entry, bool) {
	if s == nil {
		return Entry{}, false
	}
	e, ok := s.entries[src]
	return e, ok
}

// Problem is a source whose latest fetch failed, for /debug/configz.
type Problem struct {
	Source string    `json:"source"`
	Error  string    `json:"error"`
	Since  time.Time `json:"since"`
	// Keeping says what proxies get meanwhile.
	Keeping string `json:"keeping"`
}

// Problems lists the sources whose latest fetch failed, sorted.
func (s *Set) Problems() []Problem {
	out := []Problem{}
	if s == nil {
		return out
	}
	for src, e := range s.entries {
		if e.Err == nil {
			continue
		}
		p := Problem{Source: src.String(), Error: e.Err.Error(), Since: e.Since}
		if e.Keys != "" {
			p.Keeping = "the keys fetched at " + e.Fetched.UTC().Format(time.RFC3339)
		} else {
			p.Keeping = "no keys yet: a key nobody can sign with stands in, so every token of this issuer is refused (istiod's fail-closed rule)"
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Problem) int { return strings.Compare(a.Source, b.Source) })
	return out
}

// Equal reports whether s and o hold the same keys and errors.
func (s *Set) Equal(o *Set) bool {
	var a, b map[Source]Entry
	if s != nil {
		a = s.entries
	}
	if o != nil {
		b = o.entries
	}
	if len(a) != len(b) {
		return false
	}
	for k, e := range a {
		f, ok := b[k]
		if !ok || e.Keys != f.Keys || (e.Err == nil) != (f.Err == nil) || (e.Err != nil && e.Err.Error() != f.Err.Error()) {
			return false
		}
	}
	return true
}

// SourcesOf returns the sources the jwtRules of cfgs (RequestAuthentications)
// need fetched: every rule without inline jwks, by jwksUri, or by issuer
// when it has none. Sorted, without duplicates.
func SourcesOf(cfgs []config.Config) []Source {
	var out []Source
	for _, c := range cfgs {
		ra, ok := c.Spec.(*security.RequestAuthentication)
		if !ok {
			continue
		}
		for _, r := range ra.GetJwtRules() {
			if r.GetJwks() != "" {
				continue
			}
			src := Source{URI: r.GetJwksUri()}
			if src.URI == "" {
				if r.GetIssuer() == "" {
					continue
				}
				src.Issuer = r.GetIssuer()
			}
			out = append(out, src)
		}
	}
	slices.SortFunc(out, func(a, b Source) int {
		if d := strings.Compare(a.URI, b.URI); d != 0 {
			return d
		}
		return strings.Compare(a.Issuer, b.Issuer)
	})
	return slices.Compact(out)
}

// TimeoutsOf returns the fetch timeout the jwtRules of cfgs set per
// source (a rule's timeout, as istiod fetches with it; the longest when
// rules share a source); sources without one are absent.
func TimeoutsOf(cfgs []config.Config) map[Source]time.Duration {
	out := map[Source]time.Duration{}
	for _, c := range cfgs {
		ra, ok := c.Spec.(*security.RequestAuthentication)
		if !ok {
			continue
		}
		for _, r := range ra.GetJwtRules() {
			if r.GetJwks() != "" || r.GetTimeout() == nil {
				continue
			}
			src := Source{URI: r.GetJwksUri()}
			if src.URI == "" {
				src.Issuer = r.GetIssuer()
			}
			if d := r.GetTimeout().AsDuration(); d > out[src] {
				out[src] = d
			}
		}
	}
	return out
}

// ErrNotJWKS is the error of a body that is not a JSON Web Key Set.
var ErrNotJWKS = errors.New("not a JSON Web Key Set")

// Check accepts a JSON object whose "keys" is an array (RFC 7517 §5),
// as istiod checks a fetched body before inlining it: anything else is
// refused, so a jwksUri cannot get an arbitrary body into proxy config.
func Check(body []byte) error {
	var doc struct {
		Keys *json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("%w: invalid JSON: %v", ErrNotJWKS, err)
	}
	if doc.Keys == nil {
		return fmt.Errorf("%w: no \"keys\" member", ErrNotJWKS)
	}
	var keys []json.RawMessage
	if err := json.Unmarshal(*doc.Keys, &keys); err != nil {
		return fmt.Errorf("%w: \"keys\" is not an array", ErrNotJWKS)
	}
	return nil
}

// PublicOnly is a key set whose private key was discarded when it was
// made: no token verifies against it. A jwt_authn provider whose keys
// could never be fetched gets it, so a token of that issuer is refused
// rather than let through (istiod does the same with a key of its own).
const PublicOnly = `{"keys":[{"kty":"RSA","e":"AQAB","n":"tuSyjDorExnmR-9RPLVHUZVzU_Pg3zvSMhB1a0cBeFR9-gWni4QsYcfwzL14D67VM3NdnRorX56o0H45-_OAUvf7FIcUSxS_KFrTaHfA3tNc3ZCu3GDRwzJJyU94b-vngUDl6c5ZFCWW58oPHMZuZ9PO4Lku8etwKakkpxBRfNLiXsBreuYFA3C6Q9B5m6AnNvn4-CUY6EXymyf97uha-xDbVIkygayAyhwI78L7COTdoCsDS6aM2iwgpsRmvTTaIfCbLzPuHJM7uq14nhf5V4sDttBLXDo6kt-PW5OXkGSsEeRvNxwlJJ01DWH8j1OM7Z9f6WFpOR-qYzHqCcM-SQ"}]}`
