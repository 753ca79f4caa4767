package identity

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func TestTokenLifecycle(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	s := &TokenStore{Dir: filepath.Join(t.TempDir(), "tokens"), Now: clk.Now}
	tok, rec, err := s.Create(TokenSpec{Namespace: "bar", ServiceAccount: "vm-sa", Group: "foo", TTL: time.Hour, MaxUses: 2})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(mustRead(t, filepath.Join(s.Dir, TokenFile)), strings.Split(tok, ".")[2]) {
		t.Fatal("the store holds the secret")
	}
	if st, _ := os.Stat(filepath.Join(s.Dir, TokenFile)); st.Mode() != 0o600 {
		t.Fatalf("tokens.json mode %v", st.Mode())
	}
	a := &TokenAuthenticator{Store: s, TrustDomain: func() string { return "cluster.local" }}
	caller, err := a.Authenticate(context.Background(), Credentials{BearerToken: tok})
	if err != nil || caller.ID != workload || caller.Method != MethodToken || caller.Detail != rec.ID || caller.Group != "foo" {
		t.Fatalf("first use: %+v, %v", caller, err)
	}
	if _, err := (&TokenAuthenticator{Store: s, TrustDomain: a.TrustDomain, NoSpend: true}).Authenticate(context.Background(), Credentials{BearerToken: tok}); err != nil {
		t.Fatalf("check without spending: %v", err)
	}
	if _, err := s.Use(tok); err != nil {
		t.Fatalf("second use: %v", err)
	}
	if _, err := s.Use(tok); !errors.Is(err, ErrTokenUsedUp) {
		t.Fatalf("third use: %v, want used up", err)
	}
	if _, err := s.Check(tok); !errors.Is(err, ErrTokenUsedUp) {
		t.Fatalf("check of a used-up token: %v", err)
	}

	forged := tok[:len(tok)-4] + "AAAA"
	if forged == tok {
		forged = tok[:len(tok)-4] + "BBBB"
	}
	other, rec2, _ := s.Create(TokenSpec{Namespace: "bar", ServiceAccount: "vm-sa", TTL: time.Hour})
	for _, c := range []struct {
		tok  string
		want error
	}{
		{"", ErrTokenMalformed},
		{"bmt1.zz.yy", ErrTokenMalformed},
		{"Bearer " + tok, ErrTokenMalformed},
		{"bmt1.0123456789abcdef." + strings.Split(tok, ".")[2], ErrTokenUnknown},
		{forged, ErrTokenBadSecret},
		{strings.Replace(other, rec2.ID, rec.ID, 1), ErrTokenBadSecret},
	} {
		if _, err := s.Use(c.tok); !errors.Is(err, c.want) {
			t.Errorf("Use(%q) = %v, want %v", c.tok, err, c.want)
		}
	}
	if _, err := s.Revoke(rec2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Use(other); !errors.Is(err, ErrTokenRevoked) {
		t.Fatalf("after revoke: %v", err)
	}
	if _, err := s.Revoke("0000000000000000"); !errors.Is(err, ErrTokenUnknown) {
		t.Fatalf("revoke unknown: %v", err)
	}
	third, _, _ := s.Create(TokenSpec{Namespace: "bar", ServiceAccount: "vm-sa", TTL: time.Minute})
	clk.Advance(time.Minute)
	if _, err := s.Use(third); !errors.Is(err, ErrTokenExpired) {
		t.Fatalf("after expiry: %v", err)
	}
	list, err := s.List()
	if err != nil || len(list) != 3 {
		t.Fatalf("list: %d, %v", len(list), err)
	}
	got := []string{list[0].State(clk.Now()), list[1].State(clk.Now()), list[2].State(clk.Now())}
	if strings.Join(got, ",") != "used up,revoked,expired" || list[0].Uses != 2 {
		t.Fatalf("states %v uses %d", got, list[0].Uses)
	}
	clk.Advance(31 * 24 * time.Hour)
	if _, _, err := s.Create(TokenSpec{Namespace: "a", ServiceAccount: "b", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.List(); len(list) != 1 {
		t.Fatalf("records long expired are dropped: %d left", len(list))
	}
}

func TestTokenCreateRejects(t *testing.T) {
	s := &TokenStore{Dir: t.TempDir()}
	for _, spec := range []TokenSpec{
		{Namespace: "", ServiceAccount: "a", TTL: time.Hour},
		{Namespace: "Bad", ServiceAccount: "a", TTL: time.Hour},
		{Namespace: "a", ServiceAccount: "b", TTL: 0},
		{Namespace: "a", ServiceAccount: "b", TTL: time.Hour, MaxUses: -1},
	} {
		if _, _, err := s.Create(spec); err == nil {
			t.Errorf("Create(%+v) accepted", spec)
		}
	}
}

// Two stores on one directory (as baremeshctl and baremeshd) spend a
// limited token exactly its number of times, never more.
func TestTokenUsesAcrossStores(t *testing.T) {
	dir := t.TempDir()
	tok, _, err := (&TokenStore{Dir: dir}).Create(TokenSpec{Namespace: "a", ServiceAccount: "b", TTL: time.Hour, MaxUses: 5})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	ok := 0
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := (&TokenStore{Dir: dir}).Use(tok); err == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			} else if !errors.Is(err, ErrTokenUsedUp) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok != 5 {
		t.Fatalf("%d uses succeeded, want 5", ok)
	}
}

func TestTokenStoreCorrupt(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, TokenFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := (&TokenStore{Dir: dir}).Use("bmt1.0123456789abcdef.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	if !errors.Is(err, ErrTokenStore) || !strings.Contains(err.Error(), TokenFile) {
		t.Fatalf("corrupt store: %v", err)
	}
}

func FuzzParseToken(f *testing.F) {
	tok, _, _, _ := newToken()
	f.Add(tok)
	f.Add("bmt1..")
	f.Add("bmt1.0123456789abcdef.====")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseToken(s)
		if err != nil {
			if !errors.Is(err, ErrTokenMalformed) {
				t.Fatalf("error %v is not ErrTokenMalformed", err)
			}
			return
		}
		if len(p.ID) != tokenIDLen || len(p.Secret) != tokenSecretLen {
			t.Fatalf("accepted %q as %+v", s, p)
		}
	})
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
