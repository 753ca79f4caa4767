package identity

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestTokenOnAFullDisk (issue #32): a token minted, spent or merged from
// another replica while the state directory's file system is full is
// refused with an error a caller can tell apart (ErrTokenStore wrapping
// ENOSPC; before, the cause was flattened to text), nothing is half
// written or left behind, the tokens already there stay, and once space
// is freed the same calls work and keep everything. The file system is a
// real tmpfs (root only).
func TestTokenOnAFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
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
	fillDisk(t, filler)
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

// fillDisk writes path until its file system is full.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := bytes.Repeat([]byte{'x'}, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}
