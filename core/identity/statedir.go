package identity

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// CheckStateDir refuses a state directory another local user could
// tamper with: whoever can write tokens/ mints join tokens (and so
// certificates for any namespace), whoever can write ca/ replaces the
// CA, whoever can read either reads the CA key or token records. The
// directory itself and workloads/ must be writable by their owner only;
// ca/ and tokens/ must be private (no group or other access); every
// entry of ca/ and tokens/ must be writable by its owner only; and each
// must be owned by this process's user or root (baremeshctl, run as
// root, gives what it writes to the directory's owner). Run as root (the
// package's postinst runs `baremeshd check-config` so, for a daemon that
// runs as the baremesh user), the directory's own owner stands for the
// service user: everything under it must be owned by that user or root;
// the daemon's own check at start still holds the directory to its user.
// Missing
// directories are fine: baremeshd makes them 0700. The error names the
// path, its mode and the fix; nothing is changed (a loose directory may
// already hold what an attacker wrote).
func CheckStateDir(dir string) error {
	owner := -1 // a uid besides this process's and root that may own entries
	if os.Geteuid() == 0 {
		if fi, err := os.Stat(dir); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				owner = int(st.Uid)
			}
		}
	}
	checkPath := func(path string, deny fs.FileMode) error { return checkPathOwned(path, deny, owner) }
	if err := checkPath(dir, 0o022); err != nil {
		return err
	}
	if err := CheckStateFormat(dir); err != nil { // stateformat.go
		return err
	}
	if err := checkPath(filepath.Join(dir, "workloads"), 0o022); err != nil {
		return err
	}
	for _, sub := range []string{"ca", "tokens"} {
		p := filepath.Join(dir, sub)
		if err := checkPath(p, 0o077); err != nil {
			return err
		}
		entries, err := os.ReadDir(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("state directory %s: %w", p, err)
		}
		for _, e := range entries {
			if err := checkPath(filepath.Join(p, e.Name()), 0o022); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkPathOwned refuses path (not followed if a symlink: a link is
// refused unless it and its target pass) when its mode has any of the
// bits in deny or its owner is neither this process's user, root nor
// owner (-1: none).
func checkPathOwned(path string, deny fs.FileMode, owner int) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		if err := checkOwner(path, fi, owner); err != nil {
			return err
		}
		if fi, err = os.Stat(path); err != nil {
			return fmt.Errorf("state directory: %w", err)
		}
	}
	if err := checkOwner(path, fi, owner); err != nil {
		return err
	}
	if m := fi.Mode().Perm(); m&deny != 0 {
		want := m &^ deny
		return fmt.Errorf("state directory: %s has mode %04o: another local user could %s it (chmod %04o %s, and check what it holds)",
			path, m, map[bool]string{true: "read or write", false: "write"}[deny&0o044 != 0], want, path)
	}
	return nil
}

func checkOwner(path string, fi fs.FileInfo, owner int) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Geteuid(); int(st.Uid) != uid && st.Uid != 0 && int(st.Uid) != owner {
		return fmt.Errorf("state directory: %s is owned by uid %d, not by this process's user (%d) or root", path, st.Uid, uid)
	}
	return nil
}
