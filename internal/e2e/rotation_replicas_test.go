package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baremesh/baremesh/core/identity"
	"github.com/baremesh/baremesh/core/push"
)

// TestRootRotationTwoReplicas: two baremeshd replicas read one CA
// directory (caCertsDir, shared as a plugged-in CA is); each rotation step
// written by baremeshctl is loaded by both (the command waits for both to
// report it on /debug/certz), and a certificate either replica issued is
// accepted by the other at every step: a workload renews alternately at
// A and B through prepare, activate and retire, and its certificate from
// before activate is refused by both after retire.
func TestRootRotationTwoReplicas(t *testing.T) {
	shared := t.TempDir()
	if _, err := identity.LoadCA(identity.CAOptions{Dir: shared, Organization: "cluster.local"}); err != nil {
		t.Fatal(err)
	}
	cfgA, a := startCADaemon(t, "caCertsDir: "+shared+"\n")
	_, b := startCADaemon(t, "caCertsDir: "+shared+"\n")
	daemons := "http://" + a.HTTPAddr() + ",http://" + b.HTTPAddr()
	root := func() []byte { r, _ := os.ReadFile(filepath.Join(shared, identity.RootCertFile)); return r }

	// First certificate from A with a join token, then renewals with the
	// certificate, alternating replicas.
	vm := bootstrapVM(t, a, cfgA, time.Hour)
	token, _ := os.ReadFile(filepath.Join(vm.dir, "var/run/secrets/tokens/istio-token"))
	resp, key, err := createWith(t, a.TLSAddr(), root(), nil, nil, string(token), time.Hour)
	must(t, err)
	chain := []byte(strings.Join(resp.GetCertChain()[:len(resp.GetCertChain())-1], ""))
	renewAt := func(step, addr string) {
		t.Helper()
		resp, k, err := createWith(t, addr, root(), chain, key, "", time.Hour)
		if err != nil {
			t.Fatalf("%s: renewal at %s: %v", step, addr, err)
		}
		chain, key = []byte(strings.Join(resp.GetCertChain()[:len(resp.GetCertChain())-1], "")), k
		if n := len(pemCerts([]byte(resp.GetCertChain()[len(resp.GetCertChain())-1]))); step != "retired" && step != "before" && n != 2 {
			t.Fatalf("%s: the response's trust bundle holds %d roots, want 2", step, n)
		}
	}
	renewAt("before", b.TLSAddr())

	var oldChain, oldKey []byte // a certificate from before activate
	for _, step := range []string{"prepare", "activate", "retire"} {
		rc, out, errOut := runCtl("ca", "rotate", step, "--config", cfgA, "--daemon", daemons)
		if rc != 0 {
			t.Fatalf("ca rotate %s: %d\n%s%s", step, rc, out, errOut)
		}
		if !strings.Contains(out, a.HTTPAddr()+": trusts") || !strings.Contains(out, b.HTTPAddr()+": trusts") {
			t.Fatalf("ca rotate %s: not both replicas reported:\n%s", step, out)
		}
		t.Logf("ca rotate %s:\n%s", step, out)
		switch step {
		case "prepare":
			// The trust bundle proxies get over PCDS follows (push reason trust).
			waitFor(t, 10*time.Second, "both roots in each replica's PCDS trust bundle", func() bool {
				for _, d := range []interface {
					Pipeline() *push.Pipeline
				}{a, b} {
					if pc := d.Pipeline().Current(); pc == nil || len(pemCerts(pc.TrustRoots)) != 2 {
						return false
					}
				}
				return true
			})
			renewAt("prepared", a.TLSAddr())
			renewAt("prepared", b.TLSAddr())
			oldChain, oldKey = chain, key
		case "activate":
			renewAt("activated", b.TLSAddr())
			if pemCerts(chain)[0].CheckSignatureFrom(pemCerts(root())[0]) == nil { // root-cert.pem: old, new
				t.Fatal("activated: B still signs with the old root")
			}
			renewAt("activated", a.TLSAddr())
		case "retire":
			renewAt("retired", b.TLSAddr())
			renewAt("retired", a.TLSAddr())
		}
	}
	for _, addr := range []string{a.TLSAddr(), b.TLSAddr()} {
		_, _, err := createWith(t, addr, root(), oldChain, oldKey, "", time.Hour)
		if s := status.Convert(err); s.Code() != codes.Unauthenticated || !strings.HasPrefix(s.Message(), "cert_retired_root:") {
			t.Fatalf("certificate from before activate, at %s after retire: %v", addr, err)
		}
	}
}
