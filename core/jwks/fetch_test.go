package jwks_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/jwks"
	"github.com/baremesh/baremesh/core/testkit"
)

// TestMain fails the package's tests if they leave goroutines running.
func TestMain(m *testing.M) { testkit.Main(m.Run) }

const (
	keyA = `{"keys":[{"kty":"RSA","kid":"a","e":"AQAB","n":"AAAA"}]}`
	keyB = `{"keys":[{"kty":"RSA","kid":"b","e":"AQAB","n":"BBBB"}]}`
)

// jwksServer is a real HTTP server serving a key set that the test
// rotates, or a misbehaviour.
type jwksServer struct {
	*httptest.Server
	mu      sync.Mutex
	body    string
	code    int
	stall   chan struct{} // closed at cleanup: a stalled request returns
	stalled atomic.Bool
	hits    atomic.Int64
}

func newServer(t *testing.T, body string) *jwksServer {
	s := &jwksServer{body: body, code: 200, stall: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if s.stalled.Load() {
			select {
			case <-s.stall:
			case <-r.Context().Done():
			}
			return
		}
		s.mu.Lock()
		body, code := s.body, s.code
		s.mu.Unlock()
		if r.URL.Path == "/.well-known/openid-configuration" {
			body = `{"issuer":"x","jwks_uri":"` + s.URL + `/keys"}`
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(func() { close(s.stall); s.Close() })
	return s
}

func (s *jwksServer) serve(body string, code int) {
	s.mu.Lock()
	s.body, s.code = body, code
	s.mu.Unlock()
}

// run starts f, recording every set it publishes.
func run(t *testing.T, opts jwks.Options, srcs ...jwks.Source) (*jwks.Fetcher, *atomic.Int64) {
	t.Helper()
	var changes atomic.Int64
	opts.OnChange = func(*jwks.Set) { changes.Add(1) }
	f := jwks.New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	f.Want(srcs)
	return f, &changes
}

func keysOf(f *jwks.Fetcher, src jwks.Source) string {
	e, _ := f.Current().Entry(src)
	return e.Keys
}

func errOf(f *jwks.Fetcher, src jwks.Source) error {
	e, _ := f.Current().Entry(src)
	return e.Err
}

// TestRotationAndOutage: the keys are fetched, a rotated key arrives
// within the refresh interval (with a change callback, which the daemon
// turns into a push), and while the server is down the last keys stay,
// with the failure named.
func TestRotationAndOutage(t *testing.T) {
	srv := newServer(t, keyA)
	src := jwks.Source{URI: srv.URL + "/keys"}
	refresh := 200 * time.Millisecond
	f, changes := run(t, jwks.Options{Refresh: refresh, RetryOnFailure: 50 * time.Millisecond, Timeout: time.Second}, src)
	testkit.Eventually(t, "first keys", func() bool { return keysOf(f, src) == keyA })
	first := changes.Load()

	srv.serve(keyB, 200)
	rotated := time.Now()
	testkit.Eventually(t, "rotated keys", func() bool { return keysOf(f, src) == keyB })
	if took := time.Since(rotated); took > refresh+time.Second {
		t.Errorf("the rotated key took %v to arrive (refresh %v)", took, refresh)
	}
	if changes.Load() <= first {
		t.Errorf("no change published for the rotation")
	}

	srv.serve("upstream down", 503)
	testkit.Eventually(t, "the failure named", func() bool { return errOf(f, src) != nil })
	if got := keysOf(f, src); got != keyB {
		t.Errorf("keys while the server fails = %q, want the last good %q", got, keyB)
	}
	probs := f.Current().Problems()
	if len(probs) != 1 || !strings.Contains(probs[0].Error, "status 503") || !strings.Contains(probs[0].Source, src.URI) ||
		!strings.Contains(probs[0].Keeping, "fetched at") {
		t.Errorf("problems = %+v, want one naming %s, status 503 and the kept keys", probs, src.URI)
	}

	srv.serve(keyA, 200)
	testkit.Eventually(t, "recovery", func() bool { return keysOf(f, src) == keyA && errOf(f, src) == nil })
	if p := f.Current().Problems(); len(p) != 0 {
		t.Errorf("problems after recovery = %+v", p)
	}
}

// TestBadSources: a jwksUri that times out, returns 10 MB, returns
// garbage, or is unreachable is a named problem, and the last good keys
// stay; one never fetched has no keys (the generator stands in
// PublicOnly).
func TestBadSources(t *testing.T) {
	big := `{"keys":[` + strings.Repeat(" ", 10<<20) + `]}`
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + dead.Addr().String() + "/keys"
	dead.Close() // nothing listens there now

	for _, tc := range []struct {
		name string
		bad  func(s *jwksServer) string // makes s misbehave, returns the URI
		want string
	}{
		{"timeout", func(s *jwksServer) string { s.stalled.Store(true); return s.URL + "/keys" }, "timed out"},
		{"10MB", func(s *jwksServer) string { s.serve(big, 200); return s.URL + "/keys" }, "body too large"},
		{"garbage", func(s *jwksServer) string { s.serve("<html>not json</html>", 200); return s.URL + "/keys" }, "not a JSON Web Key Set"},
		{"no-keys-array", func(s *jwksServer) string { s.serve(`{"keys":"x"}`, 200); return s.URL + "/keys" }, "not an array"},
		{"unreachable", func(s *jwksServer) string { return deadURL }, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, keyA)
			good := jwks.Source{URI: srv.URL + "/keys"}
			// Fetched once good, then failing: the keys stay.
			f, _ := run(t, jwks.Options{Refresh: 100 * time.Millisecond, RetryOnFailure: 50 * time.Millisecond, Timeout: 300 * time.Millisecond, MaxSize: 1 << 20}, good)
			testkit.Eventually(t, "first keys", func() bool { return keysOf(f, good) == keyA })
			uri := tc.bad(srv)
			bad := good
			if uri != good.URI {
				bad = jwks.Source{URI: uri}
				f.Want([]jwks.Source{good, bad})
			}
			testkit.Eventually(t, "the failure named", func() bool {
				e := errOf(f, bad)
				return e != nil && strings.Contains(e.Error(), tc.want)
			})
			if bad == good {
				if got := keysOf(f, good); got != keyA {
					t.Errorf("keys = %q, want the last good ones", got)
				}
			} else if got := keysOf(f, bad); got != "" {
				t.Errorf("never-fetched keys = %q, want none", got)
			}
			for _, p := range f.Current().Problems() {
				if strings.Contains(p.Source, uri) && strings.Contains(p.Error, tc.want) && strings.Contains(p.Error, uri) {
					return
				}
			}
			t.Errorf("problems %+v name no %q for %s", f.Current().Problems(), tc.want, uri)
		})
	}
}

// TestDiscovery: a rule without jwksUri is resolved through its
// issuer's OpenID discovery document.
func TestDiscovery(t *testing.T) {
	srv := newServer(t, keyA)
	src := jwks.Source{Issuer: srv.URL}
	f, _ := run(t, jwks.Options{}, src)
	testkit.Eventually(t, "keys by discovery", func() bool { return keysOf(f, src) == keyA })
	if k, ok := f.Current().Keys("", srv.URL); !ok || k != keyA {
		t.Errorf("Keys by issuer = %q %v", k, ok)
	}
}

// TestForgotten: a source no longer wanted leaves the set.
func TestForgotten(t *testing.T) {
	srv := newServer(t, keyA)
	src := jwks.Source{URI: srv.URL + "/keys"}
	f, _ := run(t, jwks.Options{}, src)
	testkit.Eventually(t, "keys", func() bool { return keysOf(f, src) == keyA })
	f.Want(nil)
	srv.serve(keyB, 200)
	f.Want([]jwks.Source{{URI: srv.URL + "/other"}})
	testkit.Eventually(t, "the old source forgotten", func() bool {
		_, ok := f.Current().Entry(src)
		return !ok
	})
}

func TestCheck(t *testing.T) {
	for body, ok := range map[string]bool{keyA: true, `{"keys":[]}`: true, `{}`: false, `[]`: false, `x`: false} {
		if err := jwks.Check([]byte(body)); (err == nil) != ok || (err != nil && !errors.Is(err, jwks.ErrNotJWKS)) {
			t.Errorf("Check(%s) = %v", body, err)
		}
	}
	if err := jwks.Check([]byte(jwks.PublicOnly)); err != nil {
		t.Errorf("PublicOnly: %v", err)
	}
}

// TestRuleTimeout: a jwtRule's timeout bounds its source's fetch (as
// istiod fetches with it), over the fetcher's default.
func TestRuleTimeout(t *testing.T) {
	srv := newServer(t, keyA)
	srv.stalled.Store(true)
	src := jwks.Source{URI: srv.URL + "/keys"}
	const ra = "apiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata: {name: r, namespace: ns}\nspec:\n  jwtRules: [{issuer: x, jwksUri: 'URI', timeout: 150ms}]\n"
	cfgs := mustConfigs(t, strings.Replace(ra, "URI", src.URI, 1))
	if got := jwks.TimeoutsOf(cfgs)[src]; got != 150*time.Millisecond {
		t.Fatalf("TimeoutsOf = %v, want 150ms", got)
	}
	f := jwks.New(jwks.Options{Timeout: time.Hour})
	f.SetTimeouts(jwks.TimeoutsOf(cfgs))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx) }()
	defer func() { cancel(); <-done }()
	f.Want(jwks.SourcesOf(cfgs))
	testkit.Eventually(t, "the rule's timeout", func() bool {
		e := errOf(f, src)
		return e != nil && strings.Contains(e.Error(), "timed out after 150ms")
	})
}

func mustConfigs(t *testing.T, manifest string) []config.Config {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(js, &raw); err != nil {
		t.Fatal(err)
	}
	c, err := config.Typed(raw, config.Source{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return []config.Config{c}
}
