package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/baremesh/baremesh/core/identity"
)

// One trust domain across replicas (issue #32): replicas of one cluster
// share the self-signed CA (its key included) and the join tokens, their
// revocations and use counts, as shared values of the registration table
// (core/cluster), that is over the cluster's gossip, which must then be
// encrypted (cluster.keyFile): without a key nothing of this is shared and
// each replica keeps its own CA and tokens, as before. A plugged-in CA
// (caCertsDir) is the operator's to share; tokens are shared either way.
const (
	sharedCAKey     = "ca"
	sharedTokenKey  = "token/"      // + ID: the token's record (version 2 once revoked)
	sharedTokenUses = "token-uses/" // + ID/replica: the uses that replica spent (the version)
)

var (
	// caJoinWait is how long a replica with seeds and no CA waits to
	// hear the cluster's before the lowest-named live member makes one;
	// caJoinMax is how long any waits before making its own (a cluster
	// of the previous release shares none).
	caJoinWait = 5 * time.Second
	caJoinMax  = time.Minute
	// tokenSyncInterval is how often the token file and the cluster's
	// tokens are merged: a token minted or revoked on one replica applies
	// on the others within it plus a gossip push.
	tokenSyncInterval = time.Second
)

// sharesTrust reports whether this replica shares its CA and tokens.
func (d *Daemon) sharesTrust() bool {
	return d.cluster != nil && d.cfg.Cluster.Enabled() && d.cfg.Cluster.KeyFile != ""
}

// joinClusterCA is called before the CA is loaded: a replica with no CA
// of its own takes the cluster's (written to its ca/ directory, so it is
// kept after restarts), waiting for it as caJoinWait says. It returns
// without writing anything when the replica has a CA, when it is the one
// to make the cluster's (LoadCA generates it, publishCA shares it), or
// when no replica shares one.
func (d *Daemon) joinClusterCA(log *slog.Logger) error {
	dir := d.cfg.CADir()
	if _, err := os.Stat(filepath.Join(dir, identity.CACertFile)); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	start := time.Now()
	for {
		if s, ok := d.cluster.SharedValue(sharedCAKey); ok {
			b, err := identity.DecodeCABundle(s.Value)
			if err == nil {
				err = identity.WriteCABundle(dir, b)
			}
			if err != nil {
				return fmt.Errorf("the cluster's CA (shared by %s): %w", s.Origin, err)
			}
			log.Info("took the cluster's CA", "from", s.Origin, "dir", dir)
			return nil
		}
		waited := time.Since(start)
		if len(d.cfg.Cluster.Seeds) == 0 || waited >= caJoinMax || waited >= caJoinWait && d.lowestMember() {
			return nil
		}
		time.Sleep(100 * time.Millisecond) // polling the table, with a deadline
	}
}

// lowestMember reports whether this replica's name is the lowest of the
// live members'.
func (d *Daemon) lowestMember() bool {
	for _, m := range d.cluster.Members() {
		if m.Name < d.cluster.Name() {
			return false
		}
	}
	return true
}

// publishCA shares this replica's self-signed CA with the cluster.
func (d *Daemon) publishCA() error {
	b, err := identity.ReadCABundle(d.cfg.CADir())
	if err != nil {
		return err
	}
	d.cluster.Publish(sharedCAKey, 1, b.Encode())
	return nil
}

// checkClusterCA logs, once per distinct root, when the cluster's shared
// CA is not this replica's (two replicas that made their own before they
// met, or an old CA restored on one): proxies cannot fail over between
// them. It returns the root it last saw.
func (d *Daemon) checkClusterCA(log *slog.Logger, last []byte) []byte {
	s, ok := d.cluster.SharedValue(sharedCAKey)
	if !ok {
		return last
	}
	b, err := identity.DecodeCABundle(s.Value)
	if err != nil || bytes.Equal(b.Root, last) {
		return last
	}
	if own := d.id.ca.RootPEM(); !bytes.Contains(own, bytes.TrimSpace(b.Root)) {
		log.Error("this replica's CA root is not the cluster's: proxies cannot fail over between them; copy one CA directory to every replica (see README, Replicas)",
			"cluster CA from", s.Origin, "dir", d.cfg.CADir())
	}
	return b.Root
}

// shareTrust runs until ctx ends: every tokenSyncInterval it shares this
// replica's tokens and takes the others' (identity.TokenStore.Merge), and
// checks the CA against the cluster's.
func (p *identityParts) shareTrust(ctx context.Context, d *Daemon) {
	log := d.log.With("component", "ca")
	t := time.NewTicker(tokenSyncInterval)
	defer t.Stop()
	var lastErr string
	var root []byte
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if d.cfg.CACertsDir == "" {
			root = d.checkClusterCA(log, root)
		}
		if err := d.syncTokens(p.tokens); err != nil {
			if err.Error() != lastErr {
				log.Warn("join tokens not shared with the cluster", "err", err)
			}
			lastErr = err.Error()
			continue
		}
		lastErr = ""
	}
}

// syncTokens publishes this replica's tokens and own use counts and
// merges the cluster's into its file.
func (d *Daemon) syncTokens(store *identity.TokenStore) error {
	self := d.cluster.Name()
	recs, err := store.List()
	if err != nil {
		return err
	}
	for _, r := range recs {
		version := int64(1)
		if r.Revoked != nil {
			version = 2
		}
		data, err := json.Marshal(r.Shareable())
		if err != nil {
			return err
		}
		d.cluster.Publish(sharedTokenKey+r.ID, version, data)
		if n := r.OwnUses(); n > 0 {
			d.cluster.Publish(sharedTokenUses+r.ID+"/"+self, int64(n), nil)
		}
	}
	byID := map[string]*identity.TokenRecord{}
	var ids []string
	for _, s := range d.cluster.SharedValues(sharedTokenKey) {
		var r identity.TokenRecord
		if err := json.Unmarshal(s.Value, &r); err != nil || r.ID == "" {
			continue // a peer's bad value: its own file still works
		}
		byID[r.ID] = &r
		ids = append(ids, r.ID)
	}
	for _, s := range d.cluster.SharedValues(sharedTokenUses) {
		id, rep, ok := strings.Cut(strings.TrimPrefix(s.Key, sharedTokenUses), "/")
		if r := byID[id]; ok && r != nil {
			if r.UsesBy == nil {
				r.UsesBy = map[string]int{}
			}
			r.UsesBy[rep] = int(s.Version)
		}
	}
	remote := make([]identity.TokenRecord, 0, len(ids))
	for _, id := range ids {
		remote = append(remote, *byID[id])
	}
	_, err = store.Merge(self, remote)
	return err
}
