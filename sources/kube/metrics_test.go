package kube

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMetricsOfAStartedCluster: a cluster that has started and not synced
// shows synced 0 (an alert on "== 0" needs the series), with its counters
// at 0; once forgotten it has no series.
func TestMetricsOfAStartedCluster(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.started("east")
	want := `# HELP baremesh_kube_cluster_synced 1 once the cluster's informers have synced and its state was delivered.
# TYPE baremesh_kube_cluster_synced gauge
baremesh_kube_cluster_synced{cluster="east"} 0
# HELP baremesh_kube_istio_config_rejects_total Istio resources read from a cluster and refused by validation.
# TYPE baremesh_kube_istio_config_rejects_total counter
baremesh_kube_istio_config_rejects_total{cluster="east"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "baremesh_kube_cluster_synced", "baremesh_kube_istio_config_rejects_total"); err != nil {
		t.Fatal(err)
	}
	m.forget("east")
	if n, err := testutil.GatherAndCount(reg, "baremesh_kube_cluster_synced", "baremesh_kube_updates_total"); err != nil || n != 0 {
		t.Fatalf("after forget: %d series, %v", n, err)
	}
}
