package kube

import (
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// ClusterStatus is what /debug/configz shows of a cluster.
type ClusterStatus struct {
	ID        string    `json:"id"`
	File      string    `json:"file"`
	Server    string    `json:"server,omitempty"`
	Connected bool      `json:"connected"`
	Synced    bool      `json:"synced"`
	Error     string    `json:"error,omitempty"`
	Since     time.Time `json:"since"`
	// IstioKinds are the Istio kinds the cluster serves and is watched for.
	IstioKinds []string `json:"istioKinds"`
	Services   int      `json:"services"`
	Pods       int      `json:"pods"`
	// RelistedUnchanged counts objects an informer's relist (after an API
	// server restart or an expired watch) delivered again unchanged; they
	// raise no event.
	RelistedUnchanged int64 `json:"relistedUnchanged"`
}

// Status returns each cluster's state and each refused kubeconfig,
// sorted by ID.
func (s *Source) Status() []ClusterStatus {
	s.mu.Lock()
	cs := make([]*cluster, 0, len(s.clusters))
	for _, c := range s.clusters {
		cs = append(cs, c)
	}
	bad := map[string]string{}
	for p, e := range s.badFiles {
		bad[p] = e
	}
	s.mu.Unlock()
	out := make([]ClusterStatus, 0, len(cs)+len(bad))
	for _, c := range cs {
		st := c.status()
		if e, ok := bad[c.file]; ok {
			st.Error = "kubeconfig refused, last good connection kept: " + e
			delete(bad, c.file)
		}
		out = append(out, st)
	}
	for p, e := range bad {
		id := strings.TrimSuffix(filepath.Base(p), filepath.Ext(p))
		out = append(out, ClusterStatus{ID: id, File: p, Error: "kubeconfig refused: " + e})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
