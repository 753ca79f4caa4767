package tlsport

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestPeersThrottleAndCSRRate: failures beyond the allowance within the
// window throttle a peer IP (all its ports) for ThrottleFor, counted
// once; old failures age out; a peer's CSRs beyond the burst wait for
// the rate. (The clock is the test's: limits are about minutes.)
func TestPeersThrottleAndCSRRate(t *testing.T) {
	now := time.Unix(1e9, 0)
	reg := prometheus.NewRegistry()
	p := NewPeers(Limits{FailuresAllowed: 3, FailureWindow: time.Minute, ThrottleFor: 2 * time.Minute, CSRBurst: 2, CSRPerMinute: 1}, nil, reg)
	p.now = func() time.Time { return now }

	for i := range 3 {
		p.Failed("10.0.0.1:5000", "token_unknown")
		now = now.Add(25 * time.Second) // the first ages out before the fourth
		if _, ok := p.Throttled("10.0.0.1:5001"); ok {
			t.Fatalf("throttled after %d failures", i+1)
		}
	}
	p.Failed("10.0.0.1:5002", "token_unknown")
	if _, ok := p.Throttled("10.0.0.1:6000"); ok {
		t.Fatal("throttled though the first failure left the window")
	}
	p.Failed("10.0.0.1:5003", "token_unknown")
	until, ok := p.Throttled("10.0.0.1:6000")
	if !ok || !until.Equal(now.Add(2*time.Minute)) {
		t.Fatalf("after 4 failures in a minute: throttled %v until %v", ok, until)
	}
	if _, ok := p.Throttled("10.0.0.2:5000"); ok {
		t.Fatal("another peer is throttled too")
	}
	p.Failed("10.0.0.1:5004", "token_unknown") // while throttled: no second count
	if n := testutil.ToFloat64(p.throttled); n != 1 {
		t.Fatalf("throttled counted %v times, want 1", n)
	}
	now = now.Add(2 * time.Minute)
	if _, ok := p.Throttled("10.0.0.1:5000"); ok {
		t.Fatal("still throttled after ThrottleFor")
	}

	if !p.AllowCSR("10.0.0.3:1") || !p.AllowCSR("10.0.0.3:2") || p.AllowCSR("10.0.0.3:3") {
		t.Fatal("want a burst of 2 CSRs, then none")
	}
	if !p.AllowCSR("10.0.0.4:1") {
		t.Fatal("another peer has its own allowance")
	}
	now = now.Add(time.Minute)
	if !p.AllowCSR("10.0.0.3:4") {
		t.Fatal("no CSR allowed a minute later at 1 a minute")
	}
}
