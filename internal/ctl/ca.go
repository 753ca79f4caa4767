package ctl

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/baremesh/baremesh/core/identity"
	"github.com/baremesh/baremesh/internal/daemonconfig"
)

// The CA's view on /debug/certz (xdsserver/ca.Certz), as baremeshctl
// reads it.
type certzJSON struct {
	Trusted    []string `json:"trusted"`
	Signer     string   `json:"signer"`
	Generation uint64   `json:"generation"`
	Issued     []struct {
		Identity string    `json:"identity"`
		Serial   string    `json:"serial"`
		NotAfter time.Time `json:"notAfter"`
		Issued   time.Time `json:"issued"`
		Peer     string    `json:"peer"`
		Method   string    `json:"method"`
		With     string    `json:"with"`
		Root     string    `json:"root"`
		Bundle   []string  `json:"bundle"`
	} `json:"issued"`
}

type certzRecord struct {
	daemon, identity, serial string
	issued, notAfter         time.Time
	peer, method, with, root string
	bundle                   []string
}

// caAgreeWithin is how long a step waits for every replica to load it
// (they re-read the CA directory every second).
var caAgreeWithin = 15 * time.Second

// caCmd is `baremeshctl ca rotate prepare|activate|retire|status`.
func caCmd(e *Env, args []string) int {
	fs := e.newFlags("ca")
	cfgFile := fs.String("config", daemonconfig.DefaultConfigFile, "baremeshd's config file (for the CA directory: caCertsDir, else stateDir/ca)")
	from := fs.String("from", "", "prepare: a directory in Istio's cacerts layout holding the new signing CA (default: generate a self-signed root)")
	force := fs.Bool("force", false, "activate/retire: go ahead although certificates are outstanding or a replica cannot be asked")
	pos, err := parse(fs, args)
	if err != nil {
		return exitParse(err)
	}
	if len(pos) != 2 || pos[0] != "rotate" || !slices.Contains([]string{"prepare", "activate", "retire", "status"}, pos[1]) {
		fs.Usage()
		return 2
	}
	cfg, err := daemonconfig.ReadFile(*cfgFile)
	if err != nil {
		return e.fail(err)
	}
	dir := cfg.CADir()
	daemons := strings.Split(e.Daemon, ",")
	rot, err := identity.ReadRotation(dir)
	if err != nil {
		return e.fail(err)
	}
	switch pos[1] {
	case "status":
		return e.caStatus(dir, rot, daemons)
	case "prepare":
		rot, err = identity.RotatePrepare(dir, identity.RotateOptions{From: *from, Now: e.Now})
		if err != nil {
			return e.fail(err)
		}
		fmt.Fprintf(e.Stdout, "prepared: new root %s trusted beside %s in %s; the old root still signs\n",
			fps(rot.NewRoots), fps(rot.OldRoots), dir)
		return e.caAgree(daemons, fps(rot.NewRoots)[0], "")
	case "activate":
		if rot == nil || rot.Phase != identity.PhasePrepared {
			return e.fail(fmt.Errorf("CA %s: activate needs a prepared rotation (run ca rotate prepare)", dir))
		}
		// Whoever still holds a bundle without the new root would refuse
		// certificates from it: wait until they renewed after prepare.
		newFP := fps(rot.NewRoots)
		if rc := e.caOutstanding(daemons, *force, "issued with a trust bundle without the new root",
			func(root string, bundle []string) bool { return !containsAny(bundle, newFP) }); rc != 0 {
			return rc
		}
		if rot, err = identity.RotateActivate(dir, e.Now); err != nil {
			return e.fail(err)
		}
		fmt.Fprintf(e.Stdout, "activated: the new root %s signs; %s stays trusted until retire\n", fps(rot.NewRoots), fps(rot.OldRoots))
		return e.caAgree(daemons, newFP[0], newFP[0])
	default: // retire
		if rot == nil || rot.Phase != identity.PhaseActivated {
			return e.fail(fmt.Errorf("CA %s: retire needs an activated rotation (run ca rotate activate)", dir))
		}
		oldFP, newFP := fps(rot.OldRoots), fps(rot.NewRoots)
		if rc := e.caOutstanding(daemons, *force, "signed by the old root", func(root string, _ []string) bool {
			return slices.Contains(oldFP, root)
		}); rc != 0 {
			if rot.Activated != nil {
				fmt.Fprintf(e.Stderr, "(certificates signed by the old root are valid until %s at the latest: activated + maxWorkloadCertTTL %s)\n",
					rot.Activated.Add(cfg.MaxWorkloadCertTTL.Duration).UTC().Format(time.RFC3339), cfg.MaxWorkloadCertTTL.Duration)
			}
			return rc
		}
		if _, err := identity.RotateRetire(dir); err != nil {
			return e.fail(err)
		}
		fmt.Fprintf(e.Stdout, "retired: %s is no longer trusted; certificates chaining to it are refused (cert_retired_root)\n", oldFP)
		return e.caAgree(daemons, newFP[0], newFP[0], oldFP...)
	}
}

// caOutstanding asks every replica's /debug/certz for certificates that
// match bad, are still valid and were not renewed, prints them and
// returns 1 unless force. A certificate is renewed when its holder got a
// later one. The holder is followed through the records: a caller
// presenting a certificate is that certificate's holder (an agent that
// restarted renews with it); a join token names one VM (its token ID,
// which Istio's agent keeps sending while its connection lasts); other
// callers (Kubernetes tokens) are told apart by peer address.
func (e *Env) caOutstanding(daemons []string, force bool, what string, bad func(root string, bundle []string) bool) int {
	now := e.Now()
	var out []string
	var issued []certzRecord
	for _, d := range daemons {
		var cz certzJSON
		if _, err := (&Env{Daemon: d, HTTP: e.HTTP}).get("/debug/certz", nil, &cz); err != nil {
			if force {
				fmt.Fprintf(e.Stderr, "warning: %v (--force: not checked)\n", err)
				continue
			}
			return e.fail(fmt.Errorf("cannot check outstanding certificates: %w (use --force to skip)", err))
		}
		for _, r := range cz.Issued {
			issued = append(issued, certzRecord{d, r.Identity, r.Serial, r.Issued, r.NotAfter, r.Peer, r.Method, r.With, r.Root, r.Bundle})
		}
	}
	slices.SortStableFunc(issued, func(a, b certzRecord) int { return a.issued.Compare(b.issued) })
	holderOf := map[string]string{} // serial -> holder
	latest := map[string]string{}   // holder -> its newest serial
	for _, r := range issued {
		h, ok := holderOf[r.with]
		switch {
		case r.method == "client-cert" && ok:
		case r.method == "client-cert" || r.method == "token":
			h = r.method + ":" + r.with
		default:
			h = r.method + ":" + r.identity + "@" + hostOf(r.peer)
		}
		holderOf[r.serial], latest[h] = h, r.serial
	}
	for _, r := range issued {
		if bad(r.root, r.bundle) && r.notAfter.After(now) && latest[holderOf[r.serial]] == r.serial {
			out = append(out, fmt.Sprintf("%s: %s serial %s peer %s (%s %s), valid until %s", r.daemon, r.identity, r.serial, r.peer,
				r.method, r.with, r.notAfter.UTC().Format(time.RFC3339)))
		}
	}
	if len(out) == 0 {
		return 0
	}
	fmt.Fprintf(e.Stderr, "%d certificate(s) %s are still valid and not renewed:\n  %s\n", len(out), what, strings.Join(out, "\n  "))
	if force {
		fmt.Fprintln(e.Stderr, "--force: going ahead; those workloads must re-bootstrap if their peers refuse them")
		return 0
	}
	fmt.Fprintln(e.Stderr, "wait for them to renew (about half their lifetime) or expire, or use --force")
	return 1
}

// caAgree waits until every replica trusts want (and signs under signer,
// when set; trusts none of gone) and prints what each loaded.
func (e *Env) caAgree(daemons []string, want, signer string, gone ...string) int {
	rc := 0
	for _, d := range daemons {
		deadline := time.Now().Add(caAgreeWithin)
		for {
			var cz certzJSON
			_, err := (&Env{Daemon: d, HTTP: e.HTTP}).get("/debug/certz", nil, &cz)
			if err == nil && slices.Contains(cz.Trusted, want) && (signer == "" || cz.Signer == signer) && !containsAny(cz.Trusted, gone) {
				fmt.Fprintf(e.Stdout, "  %s: trusts %s, signs under %s\n", d, strings.Join(cz.Trusted, " "), cz.Signer)
				break
			}
			if time.Now().After(deadline) {
				fmt.Fprintf(e.Stderr, "warning: %s has not loaded this step within %s (it re-reads the CA directory every second; does it read %s?): %v %v\n",
					d, caAgreeWithin, "the same CA directory", cz.Trusted, err)
				rc = 1
				break
			}
			time.Sleep(200 * time.Millisecond) // polling a remote daemon; nothing to wait on
		}
	}
	return rc
}

func (e *Env) caStatus(dir string, rot *identity.Rotation, daemons []string) int {
	if rot == nil {
		fmt.Fprintf(e.Stdout, "CA %s: no rotation in progress\n", dir)
	} else {
		fmt.Fprintf(e.Stdout, "CA %s: rotation %s (prepared %s", dir, rot.Phase, rot.Prepared.Format(time.RFC3339))
		if rot.Activated != nil {
			fmt.Fprintf(e.Stdout, ", activated %s", rot.Activated.Format(time.RFC3339))
		}
		fmt.Fprintf(e.Stdout, "): old %s, new %s\n", fps(rot.OldRoots), fps(rot.NewRoots))
	}
	for _, d := range daemons {
		var cz certzJSON
		if _, err := (&Env{Daemon: d, HTTP: e.HTTP}).get("/debug/certz", nil, &cz); err != nil {
			fmt.Fprintf(e.Stdout, "  %s: %v\n", d, err)
			continue
		}
		fmt.Fprintf(e.Stdout, "  %s: trusts %s, signs under %s\n", d, strings.Join(cz.Trusted, " "), cz.Signer)
	}
	return 0
}

// fps is the fingerprints of the certificates in PEM.
func fps(p string) []string {
	var out []string
	rest := []byte(p)
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return out
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			out = append(out, identity.Fingerprint(c))
		}
	}
}

func hostOf(peer string) string {
	if h, _, err := net.SplitHostPort(peer); err == nil {
		return h
	}
	return peer
}

func containsAny(have, want []string) bool {
	for _, w := range want {
		if slices.Contains(have, w) {
			return true
		}
	}
	return false
}
