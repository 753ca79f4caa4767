package ads

import "testing"

// TestFirstRequestWithForeignNonce: Istio's MCP client (adsc) stamps every
// request's nonce with the time, its first request of a type included. A
// request of a type nothing was sent of yet is the initial one whatever
// its nonce; later requests with a nonce we did not send stay stale.
func TestFirstRequestWithForeignNonce(t *testing.T) {
	e := newEnv(t)
	s := e.open(t)
	s.send("", "2026-11-23 22:21:27.313805 +0000 UTC m=+0.1", []string{"a"}, "")
	r := s.recv()
	if len(r.GetResources()) != 1 {
		t.Fatalf("initial request with a foreign nonce got %d resources, want 1", len(r.GetResources()))
	}
	gens := e.gens.Load()
	s.send(r.GetVersionInfo(), "not-our-nonce", []string{"a", "b"}, "") // stale: ignored
	s.send(r.GetVersionInfo(), r.GetNonce(), []string{"a", "b"}, "")    // current: answered
	if r2 := s.recv(); len(r2.GetResources()) != 2 {
		t.Fatalf("got %d resources, want 2", len(r2.GetResources()))
	}
	if g := e.gens.Load() - gens; g != 1 {
		t.Fatalf("%d generations after the stale and the current request, want 1 (the stale one ignored)", g)
	}
}
