package identity

import (
	"testing"
	"time"
)

// TestTokenMerge: what other replicas know of tokens merges into this
// replica's file: a new token is added with their uses, a revocation is
// taken, a use count only raises Uses by what is new, this replica's own
// count from elsewhere is ignored, and a long-dropped token is not
// brought back.
func TestTokenMerge(t *testing.T) {
	s := &TokenStore{Dir: t.TempDir()}
	tok, mine, err := s.Create(TokenSpec{Namespace: "ns", ServiceAccount: "sa", TTL: time.Hour, MaxUses: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Use(tok); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	theirs := TokenRecord{ID: "t2", SHA256: "aa", Namespace: "ns", ServiceAccount: "sa", Created: now, Expires: now.Add(time.Hour),
		UsesBy: map[string]int{"b": 2, "self": 7}}
	old := TokenRecord{ID: "t3", SHA256: "bb", Namespace: "ns", ServiceAccount: "sa", Expires: now.Add(-2 * tokenKeep)}
	m := mine.Shareable()
	m.UsesBy = map[string]int{"b": 1, "self": 5}
	changed, err := s.Merge("self", []TokenRecord{m, theirs, old})
	if err != nil || !changed {
		t.Fatalf("Merge: %v %v", changed, err)
	}
	list, _ := s.List()
	if len(list) != 2 {
		t.Fatalf("%d tokens, want 2 (the long-dropped one not brought back): %+v", len(list), list)
	}
	if got := list[0]; got.Uses != 2 || got.OwnUses() != 1 || got.UsesBy["b"] != 1 {
		t.Errorf("mine after b spent one: uses %d own %d by %v, want 2, 1, b:1", got.Uses, got.OwnUses(), got.UsesBy)
	}
	if got := list[1]; got.ID != "t2" || got.Uses != 2 || got.OwnUses() != 0 {
		t.Errorf("theirs: %+v, want t2 with b's 2 uses", got)
	}
	// The same again changes nothing; a revocation and a higher count do.
	if changed, _ := s.Merge("self", []TokenRecord{m}); changed {
		t.Error("merging the same counts again changed the file")
	}
	m.Revoked, m.UsesBy = &now, map[string]int{"b": 2}
	if _, err := s.Merge("self", []TokenRecord{m}); err != nil {
		t.Fatal(err)
	}
	list, _ = s.List()
	if got := list[0]; got.Uses != 3 || got.Revoked == nil {
		t.Errorf("after b's second use and a revocation: %+v", got)
	}
	if _, err := s.Use(tok); err == nil {
		t.Error("a revoked token was accepted")
	}
}
