package identity

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// CABundle is a self-signed CA's files as replicas of one cluster share
// it (over the encrypted gossip: it holds the key), so that every replica
// signs under one root and trusts what the others signed.
type CABundle struct {
	Cert  []byte `json:"caCert"`
	Key   []byte `json:"caKey"`
	Root  []byte `json:"rootCert"`
	Chain []byte `json:"certChain,omitempty"`
}

// ReadCABundle reads dir's CA files (cert-chain.pem is optional).
func ReadCABundle(dir string) (CABundle, error) {
	var b CABundle
	for _, f := range []struct {
		name     string
		into     *[]byte
		required bool
	}{{CACertFile, &b.Cert, true}, {CAKeyFile, &b.Key, true}, {RootCertFile, &b.Root, true}, {CertChainFile, &b.Chain, false}} {
		data, err := os.ReadFile(filepath.Join(dir, f.name))
		if errors.Is(err, fs.ErrNotExist) && !f.required {
			continue
		}
		if err != nil {
			return CABundle{}, fmt.Errorf("CA %s: %w", dir, err)
		}
		*f.into = data
	}
	return b, nil
}

// Encode is the bundle as shared.
func (b CABundle) Encode() []byte {
	data, _ := json.Marshal(b) // byte slices always encode
	return data
}

// DecodeCABundle reads a shared bundle.
func DecodeCABundle(data []byte) (CABundle, error) {
	var b CABundle
	if err := json.Unmarshal(data, &b); err != nil {
		return CABundle{}, fmt.Errorf("CA bundle: %w", err)
	}
	if len(b.Cert) == 0 || len(b.Key) == 0 || len(b.Root) == 0 {
		return CABundle{}, errors.New("CA bundle: certificate, key and root are required")
	}
	return b, nil
}

// WriteCABundle writes b into dir (made 0700) as the files LoadCA reads,
// the key first and the signing certificate last (as generateRoot), then
// loads it to check: a bundle that does not make a good CA is an error and its
// files are removed again, leaving dir as it was (empty).
func WriteCABundle(dir string, b CABundle) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{{CAKeyFile, b.Key, 0o600}, {RootCertFile, b.Root, 0o644}, {CertChainFile, b.Chain, 0o644}, {CACertFile, b.Cert, 0o600}}
	undo := func() {
		for _, f := range files {
			_ = os.Remove(filepath.Join(dir, f.name))
		}
	}
	for _, f := range files {
		if len(f.data) == 0 {
			continue
		}
		if err := WriteFileAtomic(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			undo()
			return fmt.Errorf("CA %s: %w", dir, err)
		}
	}
	if _, err := LoadCA(CAOptions{Dir: dir, Plugged: true}); err != nil {
		undo()
		return err
	}
	return nil
}
