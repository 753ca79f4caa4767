package identity

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrCAMissing is CheckCAPresent's refusal: the state directory holds what
// was made under a CA (join tokens, registrations) but the CA is gone.
var ErrCAMissing = errors.New("CA missing")

// CheckCAPresent is called before a self-signed CA would be generated in
// caDir (under stateDir). A first start has nothing under stateDir and
// passes. A state directory that already holds join tokens
// (tokens/tokens.json with a token already used), registrations
// (workloads/entries.json with any) or an emptied ca/ (only a generated
// root ever makes it) had a CA: a new root would silently make every
// certificate in the fleet untrusted, so this refuses, naming what it
// found and what to do. A CA in caDir (its key and certificate) passes.
func CheckCAPresent(stateDir, caDir string) error {
	_, certErr := os.Stat(filepath.Join(caDir, CACertFile))
	_, keyErr := os.Stat(filepath.Join(caDir, CAKeyFile))
	if certErr == nil || keyErr == nil {
		return nil // present (LoadCA checks the pair)
	}
	var found []string
	if fi, err := os.Stat(caDir); err == nil && fi.IsDir() {
		found = append(found, caDir+" exists but holds no "+CACertFile+" or "+CAKeyFile)
	}
	// Tokens made before the first start (baremeshctl needs no daemon)
	// were never spent under any CA; a spent one got a certificate.
	tokens := filepath.Join(stateDir, "tokens", TokenFile)
	if n, err := countSpentTokens(tokens); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrTokenStore, tokens, err)
	} else if n > 0 {
		found = append(found, fmt.Sprintf("%s holds %d join token(s) already used", tokens, n))
	}
	entries := filepath.Join(stateDir, "workloads", "entries.json")
	ne, err1 := countJSON(entries, "entries")
	nr, err2 := countJSON(entries, "records")
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("auto-registration state %s: %v", entries, err)
	}
	if ne+nr > 0 {
		found = append(found, fmt.Sprintf("%s holds %d registration(s)", entries, ne+nr))
	}
	if len(found) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s: no CA, but this state directory was used with one (%s); a new root would make every certificate issued so far untrusted. "+
		"Restore %s, %s and %s into %s (from a backup, or from another replica of this cluster); "+
		"to start a new trust domain on purpose, move %s and %s away first (every VM must then join again)",
		ErrCAMissing, caDir, strings.Join(found, "; "), CACertFile, CAKeyFile, RootCertFile, caDir,
		filepath.Join(stateDir, "tokens"), entries)
}

// countJSON counts the elements of the array field of a JSON object file
// (0 if the file does not exist or is empty); a file that does not parse
// is an error.
func countJSON(path, field string) (int, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) || err == nil && len(data) == 0 {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return 0, fmt.Errorf("not valid JSON: %v", err)
	}
	var arr []json.RawMessage
	if raw, ok := obj[field]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &arr); err != nil {
			return 0, fmt.Errorf("%s: %v", field, err)
		}
	}
	return len(arr), nil
}

// countSpentTokens counts the tokens of a tokens.json used at least once
// (0 if the file does not exist or is empty).
func countSpentTokens(path string) (int, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) || err == nil && len(data) == 0 {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var f tokenFile
	if err := json.Unmarshal(data, &f); err != nil {
		return 0, fmt.Errorf("not valid JSON: %v", err)
	}
	n := 0
	for _, r := range f.Tokens {
		if r.Uses > 0 || r.LastUsed != nil {
			n++
		}
	}
	return n, nil
}

// CheckTokenFile reads dir's tokens.json as the daemon would at its
// first token use: a file that does not parse (truncated, hand-edited)
// is an error naming it and what to do, at start rather than at a VM's
// join. A missing file is an empty store.
func CheckTokenFile(dir string) error {
	path := filepath.Join(dir, TokenFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrTokenStore, err)
	}
	var f tokenFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("%w: %s: %v (restore it from a backup; or move it away, which revokes every join token: make new ones with baremeshctl token create)", ErrTokenStore, path, err)
	}
	if err := checkTokenFormat(path, &f); err != nil {
		return err
	}
	for i, r := range f.Tokens {
		if r.ID == "" || len(r.SHA256) == 0 {
			return fmt.Errorf("%w: %s: token %d has no id or hash (restore the file from a backup)", ErrTokenStore, path, i)
		}
	}
	return nil
}
