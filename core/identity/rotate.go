package identity

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Root rotation, in three steps that each leave a complete, valid CA
// directory (Istio's cacerts layout) that every baremeshd reading it
// reloads (CA.Reload):
//
//   - RotatePrepare: a new signing CA is put in next/ and its root is
//     added to root-cert.pem. The old one still signs; every certificate
//     issued from now on carries both roots in its trust bundle.
//   - RotateActivate: the new CA signs (ca-cert.pem, ca-key.pem,
//     cert-chain.pem replaced); both roots stay trusted, so a peer still
//     holding an old certificate is accepted by one holding a new one.
//   - RotateRetire: the old roots leave root-cert.pem and go to
//     retired-roots.pem, so a certificate still chaining to them is
//     refused by name (ErrCertRetiredRoot).
//
// The state between steps is rotation.json; baremeshctl holds
// rotation.lock (flock) while it writes. Files are written atomically, the
// signing key before its certificate, so a baremeshd that reads between
// two writes sees a key that does not match and keeps its last good state.
const (
	RotationFile     = "rotation.json"
	rotationLockFile = "rotation.lock"
	rotationNextDir  = "next"
)

// Rotation phases.
const (
	PhasePrepared  = "prepared"
	PhaseActivated = "activated"
)

// Rotation is rotation.json: a root rotation in progress.
type Rotation struct {
	Phase     string     `json:"phase"`
	Prepared  time.Time  `json:"prepared"`
	Activated *time.Time `json:"activated,omitempty"`
	// OldRoots and NewRoots are PEM: what root-cert.pem held before, and
	// the roots the new signing CA chains to.
	OldRoots string `json:"oldRoots"`
	NewRoots string `json:"newRoots"`
}

// ErrNoRotation: a step needs a rotation in another phase (or none).
var ErrNoRotation = errors.New("no root rotation in that phase")

// RotateOptions say how a rotation step runs.
type RotateOptions struct {
	// From is a directory in Istio's cacerts layout holding the new
	// signing CA (an operator's PKI); "" generates a self-signed root.
	From         string
	Organization string
	Now          func() time.Time
}

// Fingerprint is a certificate's short name in messages: the first 8
// bytes of its SHA-256, in hex.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:8])
}

// ReadRotation reads dir's rotation.json; nil when no rotation is in
// progress.
func ReadRotation(dir string) (*Rotation, error) {
	data, err := os.ReadFile(filepath.Join(dir, RotationFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r Rotation
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, RotationFile), err)
	}
	return &r, nil
}

// RotatePrepare starts a rotation in the CA directory dir: the new
// signing CA (generated, or opts.From's) goes to dir/next and its roots
// are added to root-cert.pem.
func RotatePrepare(dir string, opts RotateOptions) (*Rotation, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	var rot *Rotation
	err := withRotationLock(dir, func(cur *Rotation) error {
		if cur != nil {
			return fmt.Errorf("%w: a rotation is already %s (since %s); run the next step", ErrNoRotation, cur.Phase, cur.Prepared.UTC().Format(time.RFC3339))
		}
		old, err := readCA(CAOptions{Dir: dir, Now: opts.Now})
		if err != nil {
			return fmt.Errorf("current CA: %w", err)
		}
		next := filepath.Join(dir, rotationNextDir)
		if err := os.RemoveAll(next); err != nil {
			return err
		}
		ok := false
		defer func() {
			if !ok {
				os.RemoveAll(next) // a refused prepare leaves nothing behind
			}
		}()
		if opts.From != "" {
			if err := copyCAFiles(opts.From, next); err != nil {
				return err
			}
		} else if err := generateRoot(CAOptions{Dir: next, Organization: opts.Organization, Now: opts.Now}); err != nil {
			return fmt.Errorf("generate the new root: %w", err)
		}
		giveToOwner(next, dir)
		nw, err := readCA(CAOptions{Dir: next, Now: opts.Now})
		if err != nil {
			return fmt.Errorf("new CA %s: %w", next, err)
		}
		for _, r := range nw.roots {
			if old.isRoot(r) {
				return fmt.Errorf("new CA: root %s is already trusted; a rotation needs a new root", Fingerprint(r))
			}
		}
		bundle := append(bytes.Clone(old.rootPEM), encodeCerts(nw.roots)...)
		rot = &Rotation{Phase: PhasePrepared, Prepared: opts.Now().UTC(), OldRoots: string(encodeCerts(old.roots)), NewRoots: string(encodeCerts(nw.roots))}
		if err := writeRotation(dir, rot); err != nil {
			return err
		}
		if err := writeCAFile(dir, RootCertFile, bundle, 0o644); err != nil {
			os.Remove(filepath.Join(dir, RotationFile))
			return err
		}
		ok = true
		return nil
	})
	return rot, err
}

// RotateActivate makes the prepared CA the signing one; both roots stay
// trusted.
func RotateActivate(dir string, now func() time.Time) (*Rotation, error) {
	if now == nil {
		now = time.Now
	}
	var rot *Rotation
	err := withRotationLock(dir, func(cur *Rotation) error {
		if cur == nil || cur.Phase != PhasePrepared {
			return fmt.Errorf("%w: activate needs a prepared rotation (%s)", ErrNoRotation, phaseOf(cur))
		}
		next := filepath.Join(dir, rotationNextDir)
		if _, err := readCA(CAOptions{Dir: next, Now: now}); err != nil {
			return fmt.Errorf("prepared CA %s: %w", next, err)
		}
		chain, err := os.ReadFile(filepath.Join(next, CertChainFile))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		// The chain first (an extra certificate in a response harms
		// nobody), then the key, the certificate last.
		if err := writeCAFile(dir, CertChainFile, chain, 0o600); err != nil {
			return err
		}
		for _, f := range []string{CAKeyFile, CACertFile} {
			data, err := os.ReadFile(filepath.Join(next, f))
			if err != nil {
				return err
			}
			if err := writeCAFile(dir, f, data, 0o600); err != nil {
				return err
			}
		}
		t := now().UTC()
		cur.Phase, cur.Activated = PhaseActivated, &t
		if err := writeRotation(dir, cur); err != nil {
			return err
		}
		rot = cur
		return os.RemoveAll(next)
	})
	return rot, err
}

// RotateRetire drops the old roots: they leave root-cert.pem and are
// appended to retired-roots.pem. Whether every certificate they signed
// has expired or been renewed is the caller's check (baremeshctl asks the
// daemons' /debug/certz).
func RotateRetire(dir string) (*Rotation, error) {
	var rot *Rotation
	err := withRotationLock(dir, func(cur *Rotation) error {
		if cur == nil || cur.Phase != PhaseActivated {
			return fmt.Errorf("%w: retire needs an activated rotation (%s)", ErrNoRotation, phaseOf(cur))
		}
		old, err := parseCerts([]byte(cur.OldRoots), RotationFile+" oldRoots")
		if err != nil {
			return err
		}
		bundle, err := os.ReadFile(filepath.Join(dir, RootCertFile))
		if err != nil {
			return err
		}
		roots, err := parseCerts(bundle, RootCertFile)
		if err != nil {
			return err
		}
		var keep []*x509.Certificate
		for _, r := range roots {
			if !containsCert(old, r) {
				keep = append(keep, r)
			}
		}
		if len(keep) == 0 {
			return fmt.Errorf("%s would hold no root after retiring %d", RootCertFile, len(old))
		}
		retired, err := os.ReadFile(filepath.Join(dir, RetiredRootsFile))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := writeCAFile(dir, RetiredRootsFile, append(retired, encodeCerts(old)...), 0o644); err != nil {
			return err
		}
		if err := writeCAFile(dir, RootCertFile, encodeCerts(keep), 0o644); err != nil {
			return err
		}
		rot = cur
		return os.Remove(filepath.Join(dir, RotationFile))
	})
	return rot, err
}

func phaseOf(r *Rotation) string {
	if r == nil {
		return "no rotation in progress"
	}
	return "this one is " + r.Phase
}

// withRotationLock runs fn under dir/rotation.lock with the current
// rotation state.
func withRotationLock(dir string, fn func(*Rotation) error) error {
	lockPath := filepath.Join(dir, rotationLockFile)
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("CA %s: %w", dir, err)
	}
	defer lock.Close()
	giveToOwner(lockPath, dir)
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("CA %s: lock %s: %w", dir, lockPath, err)
	}
	cur, err := ReadRotation(dir)
	if err != nil {
		return fmt.Errorf("CA %s: %w", dir, err)
	}
	if err := fn(cur); err != nil {
		return fmt.Errorf("CA %s: %w", dir, err)
	}
	return nil
}

func writeRotation(dir string, r *Rotation) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return writeCAFile(dir, RotationFile, append(data, '\n'), 0o600)
}

// writeCAFile writes one file of dir atomically, owned as dir is; empty
// data removes it.
func writeCAFile(dir, name string, data []byte, mode os.FileMode) error {
	path := filepath.Join(dir, name)
	if len(data) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := WriteFileAtomic(path, data, mode); err != nil {
		return err
	}
	giveToOwner(path, dir)
	return nil
}

// copyCAFiles copies an operator's cacerts directory into to (0700,
// files 0600, root-cert.pem 0644).
func copyCAFiles(from, to string) error {
	if err := os.MkdirAll(to, 0o700); err != nil {
		return err
	}
	for _, f := range []string{CACertFile, CAKeyFile, RootCertFile, CertChainFile} {
		data, err := os.ReadFile(filepath.Join(from, f))
		if errors.Is(err, fs.ErrNotExist) && f == CertChainFile {
			continue
		}
		if err != nil {
			return fmt.Errorf("new CA: %w", err)
		}
		mode := os.FileMode(0o600)
		if f == RootCertFile {
			mode = 0o644
		}
		if err := writeCAFile(to, f, data, mode); err != nil {
			return err
		}
	}
	return nil
}

func encodeCerts(cs []*x509.Certificate) []byte {
	var b []byte
	for _, c := range cs {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return b
}

func containsCert(cs []*x509.Certificate, c *x509.Certificate) bool {
	for _, x := range cs {
		if x.Equal(c) {
			return true
		}
	}
	return false
}
