package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/baremesh/baremesh/internal/load"
	"github.com/baremesh/baremesh/sources/mcp"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// routesHeader is the echo VirtualService whose header match wants
// x-user: user.
func routesHeader(user string) string {
	return fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: echo, namespace: default}
spec:
  hosts: [echo.mesh]
  http:
  - match:
    - headers:
        x-user: {exact: %s}
    route:
    - destination: {host: echo.mesh, subset: v2}
  - route:
    - destination: {host: echo.mesh, subset: v1}
`, user)
}

// hasHeaderValue: some route the proxy ACKed matches a header on value.
func hasHeaderValue(value string) load.Predicate {
	return func(v load.View) bool {
		s := v.Set(load.Route)
		if s == nil {
			return false
		}
		for _, n := range s.Names() {
			for _, vh := range v.Route(n).GetVirtualHosts() {
				for _, r := range vh.GetRoutes() {
					for _, h := range r.GetMatch().GetHeaders() {
						//lint:ignore SA1019 sidecars get the deprecated exact_match (rds/match.go)
						if h.GetStringMatch().GetExact() == value || h.GetExactMatch() == value { // sidecars get the deprecated exact_match
							return true
						}
					}
				}
			}
		}
		return false
	}
}

// TestIstiodChangeReachesFleet: a VirtualService edited in the API
// server istiod watches, until every simulated sidecar connected to
// baremeshd has ACKed the route that holds it. Defaults are small (50
// proxies, 10 changes); BAREMESH_MCP_FLEET_PROXIES and
// BAREMESH_MCP_FLEET_CHANGES scale it (500 and 100 for the issue's
// figure). istiod runs with PILOT_DEBOUNCE_AFTER=10ms, baremeshd with a
// 10 ms debounce; the figure includes the API server's watch, istiod's
// push, baremesh's MCP source, push and every proxy's ACK.
func TestIstiodChangeReachesFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver, istiod and a fleet")
	}
	proxies, changes := envInt("BAREMESH_MCP_FLEET_PROXIES", 50), envInt("BAREMESH_MCP_FLEET_CHANGES", 10)
	ist := startIstiod(t, "PILOT_DEBOUNCE_AFTER=10ms", "PILOT_DEBOUNCE_MAX=1s")
	bs := map[string]*backend{"a1": startBackend(t, "a1"), "b1": startBackend(t, "b1")}
	m := startMeshMCP(t, map[string]string{"echo.yaml": echoService(bs, map[string]string{"a1": "v1", "b1": "v2"})},
		mcp.UpstreamConfig{Name: "istiod", Address: "xds://" + ist.grpcAddr})
	ist.apply(routesHeader("user-0"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f, err := load.Start(ctx, load.Options{Addr: m.d.XDSAddr(), Proxies: proxies})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer wcancel()
	if err := f.Expect(hasHeaderValue("user-0")).Wait(wctx); err != nil {
		v := f.View(0)
		for _, n := range v.Set(load.Route).Names() {
			t.Logf("proxy 0 route %s: %v", n, v.Route(n))
		}
		t.Fatal(err)
	}
	var all load.Latencies    // per proxy per change
	var last []time.Duration  // per change: until the last proxy ACKed
	var built []time.Duration // per change: until baremesh built the snapshot holding it
	for i := 1; i <= changes; i++ {
		user := fmt.Sprintf("user-%d", i)
		w := f.Expect(hasHeaderValue(user))
		start := time.Now()
		ist.apply(routesHeader(user))
		if err := w.Wait(ctx); err != nil {
			t.Fatalf("change %d: %v", i, err)
		}
		l := w.Latencies(start)
		all = append(all, l...)
		last = append(last, l.Percentiles().Max)
		// No other change is in flight: the current snapshot is the one
		// built for this change.
		built = append(built, m.d.Pipeline().Current().Built.Sub(start))
	}
	sort.Slice(last, func(i, j int) bool { return last[i] < last[j] })
	sort.Slice(built, func(i, j int) bool { return built[i] < built[j] })
	pct := func(d []time.Duration, p int) time.Duration { return d[(len(d)*p+99)/100-1] }
	t.Logf("API server update → baremesh snapshot built (istiod, MCP source, baremesh debounce): p50 %v, p99 %v", pct(built, 50), pct(built, 99))
	p := all.Percentiles()
	t.Logf("%d proxies, %d changes in the API server: every proxy ACKed after p50 %v, p99 %v, max %v (per change); per proxy ACK p50 %v, p99 %v",
		proxies, changes, pct(last, 50), pct(last, 99), last[len(last)-1], p.P50, p.P99)
}
