package identity

import (
	"context"
	"crypto/x509"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRootRotation walks prepare, activate and retire on one CA directory
// with a CA that reloads it, as baremeshd does: what it signs with, what it
// trusts and what it refuses at each step. The certificate authenticator
// remembers verified chains; a step must not leave one accepted that the
// new roots refuse.
func TestRootRotation(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadCA(CAOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	oldRoot := ca.SignerRoot()
	id := ID{TrustDomain: "cluster.local", Namespace: "ns", ServiceAccount: "sa"}
	authn := &CertAuthenticator{CA: ca}
	issue := func() Credentials {
		t.Helper()
		is, _, err := ca.IssueWorkload(id, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return Credentials{PeerCertificates: []*x509.Certificate{is.Cert}}
	}
	accepts := func(step string, creds Credentials) {
		t.Helper()
		if _, err := authn.Authenticate(context.Background(), creds); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	reload := func(step string) {
		t.Helper()
		changed, err := ca.Reload()
		if err != nil || !changed {
			t.Fatalf("%s: reload: changed %v, %v", step, changed, err)
		}
	}
	a := issue()
	accepts("before", a)
	if _, err := RotateActivate(dir, nil); !errors.Is(err, ErrNoRotation) {
		t.Fatalf("activate without prepare: %v", err)
	}

	if _, err := RotatePrepare(dir, RotateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := RotatePrepare(dir, RotateOptions{}); !errors.Is(err, ErrNoRotation) {
		t.Fatalf("prepare twice: %v", err)
	}
	reload("prepare")
	if changed, err := ca.Reload(); changed || err != nil {
		t.Fatalf("reload of unchanged files: %v %v", changed, err)
	}
	roots := ca.TrustedRoots()
	if len(roots) != 2 || !roots[0].Equal(oldRoot) || !ca.SignerRoot().Equal(oldRoot) {
		t.Fatalf("prepared: %d roots, signer %s; want the old root signing and 2 trusted", len(roots), Fingerprint(ca.SignerRoot()))
	}
	newRoot := roots[1]
	a2 := issue()
	if a2.PeerCertificates[0].CheckSignatureFrom(oldRoot) != nil {
		t.Fatal("prepared: a new certificate is not signed by the old root")
	}
	accepts("prepared, old certificate", a)

	if _, err := RotateActivate(dir, nil); err != nil {
		t.Fatal(err)
	}
	reload("activate")
	if !ca.SignerRoot().Equal(newRoot) || len(ca.TrustedRoots()) != 2 {
		t.Fatal("activated: the new root does not sign, or not both are trusted")
	}
	b := issue()
	if b.PeerCertificates[0].CheckSignatureFrom(newRoot) != nil {
		t.Fatal("activated: a new certificate is not signed by the new root")
	}
	accepts("activated, old certificate", a)
	accepts("activated, new certificate", b)
	if rot, _ := ReadRotation(dir); rot == nil || rot.Phase != PhaseActivated {
		t.Fatalf("rotation.json after activate: %+v", rot)
	}

	if _, err := RotateRetire(dir); err != nil {
		t.Fatal(err)
	}
	reload("retire")
	if r := ca.TrustedRoots(); len(r) != 1 || !r[0].Equal(newRoot) {
		t.Fatalf("retired: %d roots trusted", len(r))
	}
	_, err = authn.Authenticate(context.Background(), a) // verified (and remembered) before
	if !errors.Is(err, ErrCertRetiredRoot) || Reason(err) != "cert_retired_root" {
		t.Fatalf("retired: old certificate: %v", err)
	}
	t.Logf("refusal: %v", err)
	accepts("retired, new certificate", b)
	// Expired as well: still told it is the retired root.
	later := &CertAuthenticator{CA: ca, Now: func() time.Time { return time.Now().Add(2 * time.Hour) }}
	if _, err := later.Authenticate(context.Background(), a); !errors.Is(err, ErrCertRetiredRoot) {
		t.Fatalf("retired and expired: %v", err)
	}
	if rot, _ := ReadRotation(dir); rot != nil {
		t.Fatalf("rotation.json left after retire: %+v", rot)
	}
	if _, err := RotateRetire(dir); !errors.Is(err, ErrNoRotation) {
		t.Fatalf("retire twice: %v", err)
	}
	// A restart reads the same state.
	again, err := LoadCA(CAOptions{Dir: dir})
	if err != nil || !again.SignerRoot().Equal(newRoot) || len(again.TrustedRoots()) != 1 {
		t.Fatalf("restart after retire: %v", err)
	}
}

// TestRootRotationPluggedFrom: a plugged-in CA (root and intermediate)
// rotated to an operator's new cacerts (--from): after activate the new
// intermediate signs and the response chain is leaf, new intermediate,
// both roots; a bad --from is refused naming it, and nothing changes.
func TestRootRotationPluggedFrom(t *testing.T) {
	dir, oldRoot, _ := pluggedDir(t)
	ca, err := LoadCA(CAOptions{Dir: dir, Plugged: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RotatePrepare(dir, RotateOptions{From: dir}); err == nil || !strings.Contains(err.Error(), "already trusted") {
		t.Fatalf("prepare from the current CA: %v", err)
	}
	if _, err := RotatePrepare(dir, RotateOptions{From: t.TempDir()}); err == nil || !strings.Contains(err.Error(), CACertFile) {
		t.Fatalf("prepare from an empty directory: %v", err)
	}
	if changed, err := ca.Reload(); changed || err != nil {
		t.Fatalf("a refused prepare changed the CA: %v %v", changed, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "next")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused prepare left next/: %v", err)
	}
	from, newRoot, newInter := pluggedDir(t)
	if _, err := RotatePrepare(dir, RotateOptions{From: from}); err != nil {
		t.Fatal(err)
	}
	if _, err := RotateActivate(dir, nil); err != nil {
		t.Fatal(err)
	}
	if changed, err := ca.Reload(); !changed || err != nil {
		t.Fatalf("reload: %v %v", changed, err)
	}
	is, _, err := ca.IssueWorkload(workload, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(is.Chain) != 3 || is.Chain[1] != string(certPEM(newInter)) || is.Chain[2] != string(certPEM(oldRoot, newRoot)) {
		t.Fatalf("chain after activate: %q", is.Chain)
	}
	if !ca.SignerRoot().Equal(newRoot) {
		t.Fatal("signer root is not the new one")
	}
}
