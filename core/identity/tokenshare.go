package identity

import "slices"

// OwnUses is the uses of r spent by this replica (all of them without a
// cluster): Uses minus what other replicas spent.
func (r TokenRecord) OwnUses() int {
	n := r.Uses
	for _, u := range r.UsesBy {
		n -= u
	}
	return max(n, 0)
}

// Merge takes what other replicas know of tokens (replicas share them
// over the cluster; self is this replica's name): a token unknown here is
// added; a revocation is taken (the earliest time); each other replica's
// use count, which only grows, raises Uses by what is new. A record's
// UsesBy[self] is ignored (this replica's own uses are in its file). It
// reports whether the file changed. Safe with baremeshctl working on the
// file at the same time (the store's lock).
func (s *TokenStore) Merge(self string, remote []TokenRecord) (bool, error) {
	changed := false
	err := s.update(func(f *tokenFile) (bool, error) {
		for _, rr := range remote {
			i := slices.IndexFunc(f.Tokens, func(r TokenRecord) bool { return r.ID == rr.ID })
			if i < 0 {
				cutoff := s.now().Add(-tokenKeep)
				if rr.Expires.Before(cutoff) || rr.Revoked != nil && rr.Revoked.Before(cutoff) {
					continue // dropped here already (update), not brought back
				}
				n := rr
				n.UsesBy, n.Uses, n.LastUsed = map[string]int{}, 0, nil
				for rep, u := range rr.UsesBy {
					if rep != self && u > 0 {
						n.UsesBy[rep], n.Uses = u, n.Uses+u
					}
				}
				f.Tokens = append(f.Tokens, n)
				changed = true
				continue
			}
			l := &f.Tokens[i]
			if rr.SHA256 != l.SHA256 {
				continue // not the same token (an ID collision): never merged
			}
			if rr.Revoked != nil && (l.Revoked == nil || rr.Revoked.Before(*l.Revoked)) {
				t := *rr.Revoked
				l.Revoked, changed = &t, true
			}
			for rep, u := range rr.UsesBy {
				if rep == self || u <= l.UsesBy[rep] {
					continue
				}
				if l.UsesBy == nil {
					l.UsesBy = map[string]int{}
				}
				l.Uses += u - l.UsesBy[rep]
				l.UsesBy[rep] = u
				changed = true
			}
		}
		return changed, nil
	})
	return changed, err
}

// Shareable is r as other replicas need it: without this replica's
// bookkeeping of theirs.
func (r TokenRecord) Shareable() TokenRecord {
	r.Uses, r.LastUsed, r.UsesBy = 0, nil, nil
	return r
}
