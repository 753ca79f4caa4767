package identity

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
)

// TestTokenOnAFullDisk (issue #32): a token minted, spent or merged from
// another replica while the state directory's file system is full is
// refused with an error a caller can tell apart (ErrTokenStore wrapping
// ENOSPC; before, the cause was flattened to text), nothing is half
// written or left behind, the tokens already there stay, and once space
// is freed the same calls work and keep everything. The file system is a
// real tmpfs (root only).
func TestTokenOnAFullDisk(t *testing.T) {
	dir := testkit.Tmpfs(t, "64k")
	s := &TokenStore{Dir: filepath.Join(dir, "tokens")}
	spec := TokenSpec{Namespace: "default", ServiceAccount: "vm", TTL: time.Hour}
	tok, kept, err := s.Create(spec)
	if err != nil {
		t.Fatal(err)
	}
	// A token another replica minted, to merge.
	other := &TokenStore{Dir: filepath.Join(t.TempDir(), "tokens")}
	_, remote, err := other.Create(spec)
	if err != nil {
		t.Fatal(err)
	}

	filler := filepath.Join(dir, "filler")
	testkit.FillDisk(t, filler)
	full := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrTokenStore) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("%s on a full disk: %v: want ErrTokenStore wrapping ENOSPC", what, err)
		}
	}
	_, _, err = s.Create(spec)
	full("create", err)
	_, err = s.Use(tok)
	full("use", err)
	_, err = s.Merge("cp-a", []TokenRecord{remote.Shareable()})
	full("merge", err)
	if tmp, _ := filepath.Glob(filepath.Join(s.Dir, ".*tmp*")); len(tmp) > 0 {
		t.Fatalf("temporary files left: %v", tmp)
	}
	if list, err := s.List(); err != nil || len(list) != 1 || list[0].ID != kept.ID || list[0].Uses != 0 {
		t.Fatalf("tokens on the full disk: %+v, %v; want only %s, unused", list, err, kept.ID)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(spec); err != nil {
		t.Fatalf("create after freeing: %v", err)
	}
	if _, err := s.Use(tok); err != nil {
		t.Fatalf("use after freeing: %v", err)
	}
	if changed, err := s.Merge("cp-a", []TokenRecord{remote.Shareable()}); err != nil || !changed {
		t.Fatalf("merge after freeing: changed %v, %v", changed, err)
	}
	list, err := s.List()
	if err != nil || len(list) != 3 {
		t.Fatalf("tokens after freeing: %+v, %v; want 3", list, err)
	}
}
