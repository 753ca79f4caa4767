package workloads

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMetricsStartAtZero: every refusal reason workloads.go counts, and
// both health states, have a series from the start (at 0), so the first
// refusal is an increase (examples/prometheus: BaremeshAutoregistrationRefused).
func TestMetricsStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	src, err := os.ReadFile("workloads.go")
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, m := range regexp.MustCompile(`Metrics\.refused\("([a-z_]+)"\)`).FindAllStringSubmatch(string(src), -1) {
		if !slices.Contains(reasons, m[1]) {
			reasons = append(reasons, m[1])
		}
	}
	if len(reasons) == 0 {
		t.Fatal("no refusal reasons found in workloads.go")
	}
	if n, err := testutil.GatherAndCount(reg, "baremesh_autoregistration_refusals_total"); err != nil || n != len(reasons) {
		t.Errorf("refusal series: %d, want %d (%v: the reasons workloads.go counts) %v", n, len(reasons), reasons, err)
	}
	if n, err := testutil.GatherAndCount(reg, "baremesh_workload_health_changes_total"); err != nil || n != 2 {
		t.Errorf("health change series: %d, want 2 %v", n, err)
	}
}
