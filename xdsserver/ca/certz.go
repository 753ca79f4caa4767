package ca

import (
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/baremesh/baremesh/core/identity"
)

// Record is one issued certificate as /debug/certz shows it.
type Record struct {
	Identity string    `json:"identity"`
	Serial   string    `json:"serial"`
	NotAfter time.Time `json:"notAfter"`
	Issued   time.Time `json:"issued"`
	// Method is how the caller authenticated (token, client-cert); With is
	// the token's ID or the presented certificate's serial.
	Method string `json:"method"`
	With   string `json:"with"`
	Group  string `json:"group,omitempty"`
	Peer   string `json:"peer,omitempty"`
	// Root is the fingerprint (identity.Fingerprint) of the root the
	// certificate chains to; Bundle those of the roots it was sent as its
	// trust bundle (two while a root rotation overlaps them).
	Root   string   `json:"root,omitempty"`
	Bundle []string `json:"bundle,omitempty"`
}

// Certz is /debug/certz: the roots this replica's CA trusts and signs
// under (fingerprints, identity.Fingerprint), how many times it reloaded,
// and the certificates it issued, newest first.
type Certz struct {
	Trusted    []string `json:"trusted"`
	Signer     string   `json:"signer"`
	Generation uint64   `json:"generation"`
	Issued     []Record `json:"issued"`
}

// certz keeps the most recent issued certificates in a ring.
type certz struct {
	mu   sync.Mutex
	ring []Record
	next int
	full bool
}

func newCertz(n int) *certz { return &certz{ring: make([]Record, n)} }

func (c *certz) add(r Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ring[c.next] = r
	c.next = (c.next + 1) % len(c.ring)
	c.full = c.full || c.next == 0
}

// Certz returns the most recent issued certificates, newest first.
func (s *Server) Certz() []Record {
	c := s.certz
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.ring[:c.next])
	if c.full {
		out = append(slices.Clone(c.ring[c.next:]), out...)
	}
	slices.Reverse(out)
	return out
}

// CertzHandler serves Certz as JSON (for /debug/certz).
func (s *Server) CertzHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		ca := s.opts.CA
		var trusted []string
		for _, r := range ca.TrustedRoots() {
			trusted = append(trusted, identity.Fingerprint(r))
		}
		_ = enc.Encode(Certz{Trusted: trusted, Signer: identity.Fingerprint(ca.SignerRoot()), Generation: ca.Generation(), Issued: s.Certz()})
	})
}
