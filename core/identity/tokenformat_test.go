package identity

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTokenFileFormat: tokens.json carries its format; a file without
// one (the releases before) reads as format 1 and is kept; a file of a
// later format is refused by every reader (a token use, a create,
// check-config's CheckTokenFile), naming the file and the formats, and
// is left as it was: a downgrade never rewrites what it cannot read.
func TestTokenFileFormat(t *testing.T) {
	dir := t.TempDir()
	s := &TokenStore{Dir: dir}
	tok, rec, err := s.Create(TokenSpec{Namespace: "ns", ServiceAccount: "sa", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, TokenFile)
	var f map[string]any
	if err := json.Unmarshal([]byte(mustRead(t, path)), &f); err != nil || f["version"] != float64(TokenFormat) {
		t.Fatalf("tokens.json: version %v (%v), want %d", f["version"], err, TokenFormat)
	}

	// The previous release's file: no version.
	delete(f, "version")
	old, _ := json.Marshal(f)
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckTokenFile(dir); err != nil {
		t.Fatalf("a file without a version: %v", err)
	}
	if _, err := s.Use(tok); err != nil {
		t.Fatalf("a token of a file without a version: %v", err)
	}

	// A later release's file.
	f["version"] = TokenFormat + 1
	later, _ := json.Marshal(f)
	if err := os.WriteFile(path, later, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"check": CheckTokenFile(dir),
		"use":   func() error { _, err := s.Use(tok); return err }(),
		"create": func() error {
			_, _, err := s.Create(TokenSpec{Namespace: "ns", ServiceAccount: "sa", TTL: time.Hour})
			return err
		}(),
		"revoke": func() error { _, err := s.Revoke(rec.ID); return err }(),
	} {
		if !errors.Is(err, ErrTokenStore) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "format 2") {
			t.Errorf("%s of a format-2 file: %v, want a refusal naming %s and its format", name, err, path)
		}
	}
	if got := mustRead(t, path); got != string(later) {
		t.Errorf("the format-2 file was rewritten:\n%s", got)
	}
}
