package cds

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"
)

// TestWarmupAndKeepalive: a balancer's warmup is Envoy's slow start, as
// istiod's setWarmup and setSlowStartConfig (for LEAST_REQUEST, the
// default, and ROUND_ROBIN; not under consistent hashing); a connection
// pool's TCP keepalive sets the fields it names (istiod's
// setKeepAliveSettings). Before, both were dropped.
func TestWarmupAndKeepalive(t *testing.T) {
	d := durationpb.New
	tests := []struct {
		name string
		lb   *networking.LoadBalancerSettings
		want string
	}{
		{"warmupDurationSecs, default balancer",
			//lint:ignore SA1019 the deprecated field is what users still write
			&networking.LoadBalancerSettings{WarmupDurationSecs: d(30e9)},
			`{"lbPolicy":"LEAST_REQUEST","leastRequestLbConfig":{"slowStartConfig":{"slowStartWindow":"30s"}}}`},
		{"warmup, round robin",
			&networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{Simple: networking.LoadBalancerSettings_ROUND_ROBIN},
				Warmup: &networking.WarmupConfiguration{Duration: d(60e9), Aggression: wrapperspb.Double(2)}},
			`{"lbPolicy":"ROUND_ROBIN","roundRobinLbConfig":{"slowStartConfig":{"slowStartWindow":"60s","aggression":{"defaultValue":2,"runtimeKey":"("},"minWeightPercent":{"value":10}}}}`},
		{"no warmup under consistent hashing",
			&networking.LoadBalancerSettings{Warmup: &networking.WarmupConfiguration{Duration: d(60e9)},
				LbPolicy: &networking.LoadBalancerSettings_ConsistentHash{ConsistentHash: &networking.LoadBalancerSettings_ConsistentHashLB{
					HashKey: &networking.LoadBalancerSettings_ConsistentHashLB_UseSourceIp{UseSourceIp: true}}}},
			`{"lbPolicy":"RING_HASH","ringHashLbConfig":{"minimumRingSize":"1024"}}`},
	}
	for _, tt := range tests {
		c := &clusterv3.Cluster{}
		applyLB(c, tt.lb, false)
		if got, _ := protojson.Marshal(c); jsonNorm(t, string(got)) != jsonNorm(t, tt.want) {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}

	c := &clusterv3.Cluster{}
	applyKeepalive(c, &networking.ConnectionPoolSettings_TCPSettings_TcpKeepalive{Time: d(300e9), Probes: 3})
	applyKeepalive(c, &networking.ConnectionPoolSettings_TCPSettings_TcpKeepalive{Interval: d(30e9)})
	want := `{"upstreamConnectionOptions":{"tcpKeepalive":{"keepaliveProbes":3,"keepaliveTime":300,"keepaliveInterval":30}}}`
	if got, _ := protojson.Marshal(c); jsonNorm(t, string(got)) != jsonNorm(t, want) {
		t.Errorf("keepalive:\n got %s\nwant %s", got, want)
	}
}

// jsonNorm is a Cluster's protojson, c written as the same message
// re-marshalled, so field order and spacing do not matter.
func jsonNorm(t *testing.T, c string) string {
	t.Helper()
	var m clusterv3.Cluster
	if err := protojson.Unmarshal([]byte(c), &m); err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	b, _ := protojson.MarshalOptions{}.Marshal(&m)
	return string(b)
}
