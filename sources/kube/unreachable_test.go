package kube_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baremesh/baremesh/sources/kube"
)

// TestUnreachableClusterAtStart: a cluster whose API server never answers
// does not hold the first snapshot beyond SyncTimeout, and is reported
// unreachable in Status, problems and metrics.
func TestUnreachableClusterAtStart(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing listens there now
	dir := t.TempDir()
	writeKubeconfig(t, dir, "gone", []byte(`apiVersion: v1
kind: Config
clusters: [{name: gone, cluster: {server: "https://`+addr+`", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: gone, context: {cluster: gone, user: u}}]
current-context: gone
`))
	reg := prometheus.NewRegistry()
	opts := fastOptions()
	opts.SyncTimeout = time.Second
	opts.Metrics = kube.NewMetrics(reg)
	start := time.Now()
	e := startEnv(t, dir, opts) // returns once synced
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("synced after %v; SyncTimeout is 1s", d)
	}
	poll(t, "the cluster reported unreachable", func() bool {
		st := e.src.Status()
		return len(st) == 1 && !st[0].Connected && !st[0].Synced && strings.Contains(st[0].Error, "unreachable") && hasProblem(e, "unreachable")
	})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "baremesh_kube_cluster_up" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == "gone" {
				found = true
				if v := m.GetGauge().GetValue(); v != 0 {
					t.Fatalf("baremesh_kube_cluster_up{cluster=gone} = %v, want 0", v)
				}
			}
		}
	}
	if !found {
		t.Fatal("no baremesh_kube_cluster_up{cluster=gone}")
	}
}
