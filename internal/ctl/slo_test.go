package ctl

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestStatusConvergenceColumns: with convergence records from the daemon,
// proxy-status shows LAST, WORST and MISSED per proxy, and the detail
// view the full record; without them the columns are absent.
func TestStatusConvergenceColumns(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ps := []proxyStatusJSON{
		{ID: "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local", Type: "sidecar", Connected: now.Add(-time.Minute),
			Convergence: &convergenceJSON{Objective: "1s", Last: "12ms", Worst: "1.5s", Converged: 4, Missed: 1, Pending: 1}},
		{ID: "router~10.0.0.2~gw.ns~ns.svc.cluster.local", Type: "router", Connected: now.Add(-time.Minute)},
	}
	var b bytes.Buffer
	writeStatus(&b, ps, now)
	lines := strings.Split(b.String(), "\n")
	if !strings.Contains(lines[0], "LAST") || !strings.Contains(lines[0], "WORST") || !strings.Contains(lines[0], "MISSED") {
		t.Fatalf("header %q", lines[0])
	}
	row := lines[1] // sorted by name: a.ns before gw.ns
	for _, want := range []string{"12ms (+1 pending)", "1.5s", "1/4"} {
		if !strings.Contains(row, want) {
			t.Errorf("row %q lacks %q", row, want)
		}
	}
	if f := strings.Fields(lines[2]); len(f) < 9 || f[6] != "-" || f[7] != "-" || f[8] != "-" {
		t.Errorf("row without a record %q (%v)", lines[2], f)
	}
	b.Reset()
	writeStatusDetail(&b, ps[:1], now)
	if !strings.Contains(b.String(), "Convergence: last 12ms, worst 1.5s (objective 1s); 4 changes ACKed, 1 over the objective, 1 pending") {
		t.Errorf("detail:\n%s", b.String())
	}
	b.Reset()
	writeStatus(&b, []proxyStatusJSON{{ID: "x", Type: "sidecar"}}, now)
	if strings.Contains(b.String(), "WORST") {
		t.Errorf("columns without records:\n%s", b.String())
	}
}
