package ca

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestIssuedStartsAtZero: certificates issued has a series per
// authentication method from the start.
func TestIssuedStartsAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	newMetrics(reg)
	if n, err := testutil.GatherAndCount(reg, "baremesh_ca_certs_issued_total"); err != nil || n != 3 {
		t.Fatalf("issued series: %d, want 3 (token, client-cert, kube-token) %v", n, err)
	}
}
