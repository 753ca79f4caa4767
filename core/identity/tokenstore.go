package identity

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// Token store files, under TokenStore.Dir.
const (
	TokenFile     = "tokens.json"
	tokenLockFile = "tokens.lock"
)

// tokenKeep is how long expired or revoked records stay listed.
const tokenKeep = 30 * 24 * time.Hour

// TokenStore keeps join tokens in Dir/tokens.json (0600, secrets only as
// SHA-256), shared by baremeshctl (create, list, revoke) and baremeshd
// (check and count uses). Every read-modify-write holds an exclusive
// flock on Dir/tokens.lock, so both can work at once, and writes replace
// the file atomically. Files created by root are given to the owner of
// Dir's parent (the state directory's service user), so the daemon can
// update them. Safe for concurrent use within and across processes.
type TokenStore struct {
	Dir string
	Now func() time.Time // nil: time.Now
}

// tokenFile is tokens.json. Version is its format: 1 since it has one
// (a file of the releases before has none and reads as 1; those releases
// ignore the field). A file of a later format is refused, never
// rewritten (checkTokenFormat).
type tokenFile struct {
	Version int           `json:"version,omitempty"`
	Tokens  []TokenRecord `json:"tokens"`
}

// TokenFormat is the tokens.json format this release reads and writes.
const TokenFormat = 1

// checkTokenFormat refuses a token file of a later format than this
// release's: a downgrade must not rewrite (and so lose) what it cannot
// read.
func checkTokenFormat(path string, f *tokenFile) error {
	if f.Version > TokenFormat {
		return fmt.Errorf("%w: %s is of format %d, written by a later baremesh (this release reads format %d): refusing to read or rewrite it; run the later release, or restore the file from this release's backup", ErrTokenStore, path, f.Version, TokenFormat)
	}
	return nil
}

// TokenSpec is what `baremeshctl token create` asks for.
type TokenSpec struct {
	Namespace, ServiceAccount, Group string
	TTL                              time.Duration
	MaxUses                          int
}

func (s *TokenStore) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Create makes a token and returns it (the only time its secret exists).
func (s *TokenStore) Create(spec TokenSpec) (string, TokenRecord, error) {
	if err := (ID{TrustDomain: "x", Namespace: spec.Namespace, ServiceAccount: spec.ServiceAccount}).Validate(); err != nil {
		return "", TokenRecord{}, err
	}
	if spec.TTL <= 0 {
		return "", TokenRecord{}, fmt.Errorf("token TTL must be positive, got %v", spec.TTL)
	}
	if spec.MaxUses < 0 {
		return "", TokenRecord{}, fmt.Errorf("token uses must not be negative, got %d", spec.MaxUses)
	}
	tok, id, hash, err := newToken()
	if err != nil {
		return "", TokenRecord{}, err
	}
	now := s.now().UTC().Truncate(time.Second)
	rec := TokenRecord{ID: id, SHA256: hash, Namespace: spec.Namespace, ServiceAccount: spec.ServiceAccount,
		Group: spec.Group, Created: now, Expires: now.Add(spec.TTL), MaxUses: spec.MaxUses}
	err = s.update(func(f *tokenFile) (bool, error) {
		f.Tokens = append(f.Tokens, rec)
		return true, nil
	})
	return tok, rec, err
}

// List returns every stored token record, oldest first.
func (s *TokenStore) List() ([]TokenRecord, error) {
	var out []TokenRecord
	err := s.update(func(f *tokenFile) (bool, error) {
		out = slices.Clone(f.Tokens)
		return false, nil
	})
	return out, err
}

// Revoke marks a token revoked (by ID); revoking twice is not an error.
func (s *TokenStore) Revoke(id string) (TokenRecord, error) {
	var rec TokenRecord
	err := s.update(func(f *tokenFile) (bool, error) {
		i := slices.IndexFunc(f.Tokens, func(r TokenRecord) bool { return r.ID == id })
		if i < 0 {
			return false, fmt.Errorf("%w: %s", ErrTokenUnknown, id)
		}
		if f.Tokens[i].Revoked == nil {
			now := s.now().UTC()
			f.Tokens[i].Revoked = &now
		}
		rec = f.Tokens[i]
		return true, nil
	})
	return rec, err
}

// Use checks a presented token and, if it may authenticate, spends one use.
// Errors: ErrTokenMalformed, ErrTokenUnknown, ErrTokenBadSecret (the secret
// is checked before anything about the token is revealed),
// ErrTokenRevoked, ErrTokenExpired, ErrTokenUsedUp, or ErrTokenStore.
func (s *TokenStore) Use(token string) (TokenRecord, error) { return s.verify(token, true) }

// Check is Use without spending a use (for streams that authenticate
// again and again, such as xDS, where a use count means nothing).
func (s *TokenStore) Check(token string) (TokenRecord, error) { return s.verify(token, false) }

func (s *TokenStore) verify(token string, spend bool) (TokenRecord, error) {
	p, err := ParseToken(token)
	if err != nil {
		return TokenRecord{}, err
	}
	var rec TokenRecord
	err = s.update(func(f *tokenFile) (bool, error) {
		i := slices.IndexFunc(f.Tokens, func(r TokenRecord) bool { return r.ID == p.ID })
		if i < 0 {
			return false, fmt.Errorf("%w: %s", ErrTokenUnknown, p.ID)
		}
		r := &f.Tokens[i]
		if !secretMatches(p.Secret, r.SHA256) {
			return false, fmt.Errorf("%w: %s", ErrTokenBadSecret, p.ID)
		}
		now := s.now().UTC()
		if err := r.check(now); err != nil {
			return false, err
		}
		if !spend {
			rec = *r
			return false, nil
		}
		r.Uses++
		r.LastUsed = &now
		rec = *r
		return true, nil
	})
	return rec, err
}

// update runs fn on the file's contents under the lock and writes them
// back when fn says so. A store that does not exist yet is empty.
func (s *TokenStore) update(fn func(*tokenFile) (bool, error)) error {
	if err := s.ensureDir(); err != nil {
		return fmt.Errorf("%w: %w", ErrTokenStore, err)
	}
	lockPath := filepath.Join(s.Dir, tokenLockFile)
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrTokenStore, err)
	}
	defer lock.Close()
	giveToOwner(lockPath, s.Dir)
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("%w: lock %s: %v", ErrTokenStore, lockPath, err)
	}
	path := filepath.Join(s.Dir, TokenFile)
	var f tokenFile
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("%w: %w", ErrTokenStore, err)
	default:
		if err := json.Unmarshal(data, &f); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrTokenStore, path, err)
		}
		if err := checkTokenFormat(path, &f); err != nil {
			return err
		}
	}
	write, err := fn(&f)
	if err != nil || !write {
		return err
	}
	cutoff := s.now().Add(-tokenKeep)
	f.Tokens = slices.DeleteFunc(f.Tokens, func(r TokenRecord) bool {
		return r.Expires.Before(cutoff) || (r.Revoked != nil && r.Revoked.Before(cutoff))
	})
	f.Version = TokenFormat
	out, err := json.MarshalIndent(&f, "", "  ")
	if err != nil {
		return err
	}
	if err := WriteFileAtomic(path, append(out, '\n'), 0o600); err != nil {
		return fmt.Errorf("%w: %w", ErrTokenStore, err)
	}
	giveToOwner(path, s.Dir)
	return nil
}

func (s *TokenStore) ensureDir() error {
	if _, err := os.Stat(s.Dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return err
	}
	giveToOwner(s.Dir, filepath.Dir(s.Dir))
	return nil
}

// giveToOwner makes path owned by the owner of dir when we run as root
// (baremeshctl on the control host), so the service user keeps access.
// Failures are ignored: a non-root caller already owns what it creates.
func giveToOwner(path, dir string) {
	if os.Geteuid() != 0 {
		return
	}
	var st unix.Stat_t
	if unix.Stat(dir, &st) != nil {
		return
	}
	_ = os.Lchown(path, int(st.Uid), int(st.Gid))
}
