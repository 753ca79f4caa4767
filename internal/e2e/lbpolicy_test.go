package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
)

// TestGRPCGoConsistentHashWithoutVirtualService: a DestinationRule's
// consistentHash on a service no VirtualService routes. The default route
// carries the hash policy (as istiod's), so grpc-go's ring hash sends
// every RPC with the same x-user to one backend, and different users to
// different backends.
func TestGRPCGoConsistentHashWithoutVirtualService(t *testing.T) {
	bs := map[string]*backend{"a1": startBackend(t, "a1"), "a2": startBackend(t, "a2"), "a3": startBackend(t, "a3")}
	versions := map[string]string{"a1": "v1", "a2": "v1", "a3": "v1"}
	m := startMesh(t, map[string]string{"echo.yaml": echoServicePolicy(bs, versions, "{loadBalancer: {consistentHash: {httpHeaderName: x-user}}}")})
	cc := m.xdsClient(t, "hash")
	ctx := context.Background()
	testkit.Eventually(t, "first RPC through xDS", func() bool { _, err := call(ctx, cc); return err == nil })

	const users, perUser = 12, 20
	owner := map[string]string{} // user → the backend that answered
	used := map[string]int{}     // backend → users it served
	for u := 0; u < users; u++ {
		user := fmt.Sprintf("user-%d", u)
		// Ring hash connects to a backend on its first pick; wait until
		// this user's RPCs succeed before counting.
		testkit.Eventually(t, user+"'s first RPC", func() bool { _, err := call(ctx, cc, "x-user", user); return err == nil })
		got := map[string]int{}
		for i := 0; i < perUser; i++ {
			b, err := call(ctx, cc, "x-user", user)
			if err != nil {
				t.Fatalf("%s rpc %d: %v", user, i, err)
			}
			got[b]++
		}
		if len(got) != 1 {
			t.Fatalf("%s's %d RPCs went to %v, want one backend", user, perUser, got)
		}
		for b := range got {
			owner[user] = b
			used[b]++
		}
	}
	if len(used) < 2 {
		t.Fatalf("%d users all hashed to %v, want them spread", users, used)
	}
	t.Logf("%d users × %d RPCs, each user on one backend; users per backend: %v", users, perUser, used)
}

// spread makes n RPCs from workers concurrent callers and counts the
// answers per backend.
func spread(t *testing.T, m *mesh, pod string, workers, n int) map[string]int {
	t.Helper()
	cc := m.xdsClient(t, pod)
	ctx := context.Background()
	testkit.Eventually(t, "first RPC through xDS", func() bool { _, err := call(ctx, cc); return err == nil })
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	jobs := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		jobs <- struct{}{}
	}
	close(jobs)
	errs := make(chan error, n)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				b, err := call(ctx, cc)
				if err != nil {
					errs <- err
					continue
				}
				mu.Lock()
				counts[b]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("rpc: %v", err)
	}
	return counts
}

// TestGRPCGoLeastRequest: LEAST_REQUEST reaches grpc-go as the
// least_request policy (first in the load_balancing_policy list, which
// C-core and grpc-js answer with round_robin). With one backend thirty
// times slower, round robin still gives it half the RPCs; least request
// gives it far fewer. (At ten times slower, 50 ms against 5 ms, a run at
// a load average of 30 gave it 42%: scheduling delays blurred the gap.)
func TestGRPCGoLeastRequest(t *testing.T) {
	slow, fast := startBackend(t, "slow"), startBackend(t, "fast")
	for b, d := range map[*backend]time.Duration{slow: 150 * time.Millisecond, fast: 5 * time.Millisecond} {
		b.mu.Lock()
		b.delay = d
		b.mu.Unlock()
	}
	bs := map[string]*backend{"slow": slow, "fast": fast}
	versions := map[string]string{"slow": "v1", "fast": "v1"}
	const workers, n = 8, 240
	share := map[string]float64{}
	for _, lb := range []string{"ROUND_ROBIN", "LEAST_REQUEST"} {
		m := startMesh(t, map[string]string{"echo.yaml": echoServicePolicy(bs, versions, "{loadBalancer: {simple: "+lb+"}}")})
		got := spread(t, m, "lb-"+lb, workers, n)
		share[lb] = float64(got["slow"]) / float64(n)
		t.Logf("%s, %d RPCs from %d callers: %v (slow backend %.0f%%)", lb, n, workers, got, 100*share[lb])
	}
	if s := share["ROUND_ROBIN"]; s < 0.45 || s > 0.55 {
		t.Fatalf("round robin gave the slow backend %.0f%% of RPCs, want 50%% ±5", 100*s)
	}
	if s := share["LEAST_REQUEST"]; s > 0.40 {
		t.Fatalf("least request gave the slow backend %.0f%% of RPCs, want under 40%% (round robin: %.0f%%)", 100*s, 100*share["ROUND_ROBIN"])
	}
}

// TestGRPCGoOutlierEjection: Istio's consecutive5xxErrors reaches grpc-go
// as failure-percentage ejection, which grpc-go enforces: a backend that
// fails every RPC stops receiving traffic within about one interval, and
// the others serve every RPC after that.
func TestGRPCGoOutlierEjection(t *testing.T) {
	bs := map[string]*backend{"a1": startBackend(t, "a1"), "a2": startBackend(t, "a2"), "a3": startBackend(t, "a3")}
	versions := map[string]string{"a1": "v1", "a2": "v1", "a3": "v1"}
	m := startMesh(t, map[string]string{"echo.yaml": echoServicePolicy(bs, versions,
		"{outlierDetection: {consecutive5xxErrors: 5, interval: 1s, baseEjectionTime: 60s}}")})
	cc := m.xdsClient(t, "outlier")
	ctx := context.Background()
	testkit.Eventually(t, "three backends answer", func() bool {
		seen := map[string]bool{}
		for i := 0; i < 6; i++ {
			if b, err := call(ctx, cc); err == nil {
				seen[b] = true
			}
		}
		return len(seen) == 3
	})

	bad := bs["a1"]
	bad.mu.Lock()
	bad.failAll = true
	bad.mu.Unlock()
	start, failed, atFail := time.Now(), 0, bad.callCount()
	var ejectedAt time.Time
	// Ejected: 30 RPCs in a row succeed and a1 sees none of them.
	testkit.Eventually(t, "a1 ejected", func() bool {
		before := bad.callCount()
		for i := 0; i < 30; i++ {
			if _, err := call(ctx, cc); err != nil {
				failed++
				return false
			}
		}
		if bad.callCount() != before {
			return false
		}
		ejectedAt = time.Now()
		return true
	})
	// Istio's default retry policy, which the route has (as from istiod),
	// retries most of a1's failures on the others: a1's own count shows
	// that it took traffic while failing.
	failing := bad.callCount() - atFail
	t.Logf("a1 failing every RPC: ejected after %v, took %d RPCs while failing, %d RPCs failed at the client", ejectedAt.Sub(start).Round(10*time.Millisecond), failing, failed)
	if failing == 0 {
		t.Fatal("a1 never took traffic while failing")
	}
	before := bad.callCount()
	got := map[string]int{}
	for i := 0; i < 200; i++ {
		b, err := call(ctx, cc)
		if err != nil {
			t.Fatalf("rpc %d after the ejection: %v", i, err)
		}
		got[b]++
	}
	if bad.callCount() != before || got["a2"] < 50 || got["a3"] < 50 {
		t.Fatalf("after the ejection: a1 got %d calls, 200 RPCs went %v", bad.callCount()-before, got)
	}
	t.Logf("200 RPCs after the ejection: %v, a1: 0", got)
}
