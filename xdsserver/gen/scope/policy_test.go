package scope_test

import (
	"testing"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// TestPolicyPortLevelReplaces: port-level settings replace a policy's
// load balancer, pool, outlier detection and TLS wholesale (what they
// omit is not inherited), and a subset's port-level settings replace the
// rule's the same way, while a subset's own fields override one by one,
// as istiod's MergeSubsetTrafficPolicy.
func TestPolicyPortLevelReplaces(t *testing.T) {
	pool := &networking.ConnectionPoolSettings{Tcp: &networking.ConnectionPoolSettings_TCPSettings{MaxConnections: 100}}
	rr := &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{Simple: networking.LoadBalancerSettings_ROUND_ROBIN}}
	random := &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{Simple: networking.LoadBalancerSettings_RANDOM}}
	mtls := &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_ISTIO_MUTUAL}
	dr := &networking.DestinationRule{
		Host: "a",
		TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: rr, ConnectionPool: pool, Tls: mtls,
			PortLevelSettings: []*networking.TrafficPolicy_PortTrafficPolicy{{Port: &networking.PortSelector{Number: 8443}, LoadBalancer: random}}},
		Subsets: []*networking.Subset{
			{Name: "own", TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: random}},
			{Name: "port", TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: random,
				PortLevelSettings: []*networking.TrafficPolicy_PortTrafficPolicy{{Port: &networking.PortSelector{Number: 80}, Tls: mtls}}}},
		},
	}
	for _, tc := range []struct {
		port             uint32
		subset           string
		lb               *networking.LoadBalancerSettings
		hasPool, hasMTLS bool
	}{
		{80, "", rr, true, true},
		{8443, "", random, false, false}, // not inherited
		{80, "own", random, true, true},
		{8443, "own", random, false, false},
		{80, "port", nil, false, true}, // the subset's port level: wholesale
		{8443, "port", random, false, false},
	} {
		p := scope.Policy(dr, tc.port, tc.subset)
		lb := scope.LoadBalancer(dr, tc.port, tc.subset)
		if p.GetLoadBalancer().GetSimple() != tc.lb.GetSimple() || (p.GetLoadBalancer() == nil) != (tc.lb == nil) {
			t.Errorf("%d/%q: load balancer %v, want %v", tc.port, tc.subset, p.GetLoadBalancer(), tc.lb)
		}
		if lb.GetSimple() != tc.lb.GetSimple() || (lb == nil) != (tc.lb == nil) {
			t.Errorf("%d/%q: LoadBalancer %v, want %v", tc.port, tc.subset, lb, tc.lb)
		}
		if (p.GetConnectionPool() != nil) != tc.hasPool || (p.GetTls() != nil) != tc.hasMTLS {
			t.Errorf("%d/%q: pool %v tls %v, want pool %v tls %v", tc.port, tc.subset, p.GetConnectionPool(), p.GetTls(), tc.hasPool, tc.hasMTLS)
		}
	}
}
