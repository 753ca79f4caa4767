package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// A join token is "bmt1.<id>.<secret>": id is 8 random bytes in hex (shown
// by `baremeshctl token list`, used to revoke), secret is 32 random bytes in
// unpadded base64url. Only the secret's SHA-256 is stored (TokenStore), so
// the store file, if read, yields no usable token.
const tokenPrefix = "bmt1"

const (
	tokenIDLen     = 16 // hex characters
	tokenSecretLen = 32 // bytes
)

// ParsedToken is a token's two parts.
type ParsedToken struct {
	ID     string
	Secret []byte
}

// ParseToken checks a token's form; every failure Is ErrTokenMalformed.
func ParseToken(s string) (ParsedToken, error) {
	s = strings.TrimSpace(s)
	if len(s) > 256 {
		return ParsedToken{}, fmt.Errorf("%w: %d characters", ErrTokenMalformed, len(s))
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 || parts[0] != tokenPrefix {
		return ParsedToken{}, fmt.Errorf("%w: want %s.<id>.<secret>", ErrTokenMalformed, tokenPrefix)
	}
	if len(parts[1]) != tokenIDLen || !isLowerHex(parts[1]) {
		return ParsedToken{}, fmt.Errorf("%w: id is not %d hex digits", ErrTokenMalformed, tokenIDLen)
	}
	secret, err := base64.RawURLEncoding.Strict().DecodeString(parts[2])
	if err != nil || len(secret) != tokenSecretLen {
		return ParsedToken{}, fmt.Errorf("%w: secret is not %d bytes of base64url", ErrTokenMalformed, tokenSecretLen)
	}
	return ParsedToken{ID: parts[1], Secret: secret}, nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func newToken() (token string, id string, hash string, err error) {
	b := make([]byte, tokenIDLen/2+tokenSecretLen)
	if _, err := rand.Read(b); err != nil {
		return "", "", "", err
	}
	id = hex.EncodeToString(b[:tokenIDLen/2])
	secret := b[tokenIDLen/2:]
	return tokenPrefix + "." + id + "." + base64.RawURLEncoding.EncodeToString(secret), id, hashSecret(secret), nil
}

func hashSecret(secret []byte) string {
	h := sha256.Sum256(secret)
	return hex.EncodeToString(h[:])
}

func secretMatches(secret []byte, hash string) bool {
	return subtle.ConstantTimeCompare([]byte(hashSecret(secret)), []byte(hash)) == 1
}

// TokenRecord is a join token as stored (without its secret).
type TokenRecord struct {
	ID             string    `json:"id"`
	SHA256         string    `json:"sha256"`
	Namespace      string    `json:"namespace"`
	ServiceAccount string    `json:"serviceAccount"`
	Group          string    `json:"group,omitempty"`
	Created        time.Time `json:"created"`
	Expires        time.Time `json:"expires"`
	MaxUses        int       `json:"maxUses,omitempty"` // 0: any number within its lifetime
	Uses           int       `json:"uses"`
	// UsesBy are the uses other replicas of a cluster spent, as last
	// merged (TokenStore.Merge); this replica's own are Uses minus their
	// sum.
	UsesBy   map[string]int `json:"usesBy,omitempty"`
	LastUsed *time.Time     `json:"lastUsed,omitempty"`
	Revoked  *time.Time     `json:"revoked,omitempty"`
}

// State is "valid", "expired", "revoked" or "used up" at now.
func (r TokenRecord) State(now time.Time) string {
	switch {
	case r.Revoked != nil:
		return "revoked"
	case !now.Before(r.Expires):
		return "expired"
	case r.MaxUses > 0 && r.Uses >= r.MaxUses:
		return "used up"
	}
	return "valid"
}

// check returns why the record cannot authenticate now, or nil.
func (r TokenRecord) check(now time.Time) error {
	switch r.State(now) {
	case "revoked":
		return fmt.Errorf("%w: %s (revoked %s)", ErrTokenRevoked, r.ID, r.Revoked.UTC().Format(time.RFC3339))
	case "expired":
		return fmt.Errorf("%w: %s (expired %s)", ErrTokenExpired, r.ID, r.Expires.UTC().Format(time.RFC3339))
	case "used up":
		return fmt.Errorf("%w: %s (%d of %d uses)", ErrTokenUsedUp, r.ID, r.Uses, r.MaxUses)
	}
	return nil
}

// TokenAuthenticator accepts a join token from the bearer header: the
// caller becomes the token's namespace and service account in the mesh's
// current trust domain. Each success spends one use, unless NoSpend.
type TokenAuthenticator struct {
	Store       *TokenStore
	TrustDomain func() string
	// NoSpend checks the token without counting a use (xDS streams).
	NoSpend bool
}

var _ Authenticator = (*TokenAuthenticator)(nil)

// Authenticate implements Authenticator.
func (a *TokenAuthenticator) Authenticate(_ context.Context, creds Credentials) (*Caller, error) {
	if creds.BearerToken == "" {
		return nil, ErrNoCredentials
	}
	use := a.Store.Use
	if a.NoSpend {
		use = a.Store.Check
	}
	rec, err := use(creds.BearerToken)
	if err != nil {
		return nil, err
	}
	return &Caller{
		ID:     ID{TrustDomain: a.TrustDomain(), Namespace: rec.Namespace, ServiceAccount: rec.ServiceAccount},
		Method: MethodToken, Detail: rec.ID, Group: rec.Group,
	}, nil
}
