package ads

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// TestCountersStartAtZero: a new server exposes, at 0, the NACKs of every
// type it serves, stream ends of every reason, refusals of every cap and
// SLO counts of every proxy type, so the first event of each is an
// increase an alert sees (examples/prometheus/baremesh-alerts.yaml).
func TestCountersStartAtZero(t *testing.T) {
	snaps := &fixedSnaps{}
	snaps.pc.Store(&push.PushContext{Version: 1})
	reg := prometheus.NewRegistry()
	New(snaps, Options{Registerer: reg, Types: []*xdstype.Type{xdstype.Cluster, xdstype.Listener}})
	for name, want := range map[string]int{
		"baremesh_xds_nacks_total":                  2,
		"baremesh_xds_stream_ends_total":            7,
		"baremesh_xds_streams_refused_total":        3,
		"baremesh_xds_convergence_slo_missed_total": 3,
		"baremesh_xds_converged_changes_total":      3,
	} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != want {
			t.Errorf("%s: %d series, want %d (%v)", name, n, want, err)
		}
	}
}
