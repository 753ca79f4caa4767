package cds

import (
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// applyPolicy sets the load balancer (when lb, i.e. the cluster type
// allows choosing one), outlier detection, circuit breakers and HTTP
// protocol options from a merged traffic policy, and reports whether the
// cluster is HTTP/2 (protocolOptions).
func applyPolicy(c *clusterv3.Cluster, v *scope.View, svc *model.Service, p model.Port, policy *networking.TrafficPolicy, lb bool) bool {
	proxyless := v.Proxy.Proxyless
	if lb {
		applyLB(c, policy.GetLoadBalancer(), proxyless)
	}
	if od := policy.GetOutlierDetection(); od != nil && proxyless {
		c.OutlierDetection = grpcOutlier(od)
	} else if od != nil {
		applyOutlier(c, od)
	}
	if !proxyless { // gRPC reads no common_lb_config; istiod's grpcgen sets none
		setting, force := scope.LocalityLbSetting(v.Push, policy, svc)
		applyLocalityWeighted(c, setting, force)
	}
	c.CircuitBreakers = circuitBreakers(policy.GetConnectionPool(), proxyless)
	if rb := policy.GetRetryBudget(); rb != nil && !proxyless {
		c.CircuitBreakers = withRetryBudget(c.CircuitBreakers, rb)
	}
	if !proxyless {
		// As istiod's applyTCPKeepalive: the mesh's keepalive, each
		// field overridden by the pool's.
		applyKeepalive(c, v.Push.Mesh.GetTcpKeepalive())
		applyKeepalive(c, policy.GetConnectionPool().GetTcp().GetTcpKeepalive())
	}
	var h2 bool
	c.TypedExtensionProtocolOptions, h2 = protocolOptions(v, p, policy, true)
	if !proxyless {
		panicModeOff(c)
	}
	return h2
}

// panicModeOff sets a healthy panic threshold of 0% where no outlier
// detection's minHealthPercent set one: istiod's applyLoadBalancer does
// so on every outbound Envoy cluster (PILOT_AUTO_SEND_UNHEALTHY_ENDPOINTS
// is on by default), so that with most hosts unhealthy or ejected Envoy
// keeps to the healthy ones instead of spreading over all of them
// (Envoy's default: panic below 50% healthy). Call it last.
func panicModeOff(c *clusterv3.Cluster) {
	switch {
	case c.CommonLbConfig == nil:
		c.CommonLbConfig = noPanicLB
	case c.CommonLbConfig.HealthyPanicThreshold == nil:
		c.CommonLbConfig.HealthyPanicThreshold = zeroPercent
	}
}

// Shared by every cluster that has no other common LB settings; never
// altered (panicModeOff runs after everything that sets a field).
var (
	zeroPercent = &typev3.Percent{}
	noPanicLB   = &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: zeroPercent}
)

// applyLB maps Istio's load balancer settings. Istio's default is
// LEAST_REQUEST; proxyless gRPC gets ROUND_ROBIN, for MAGLEV and RANDOM,
// which gRPC does not implement, RING_HASH and ROUND_ROBIN, and for
// LEAST_REQUEST and LEAST_CONN a list to take the first known policy of
// (leastRequestPolicies).
func applyLB(c *clusterv3.Cluster, lb *networking.LoadBalancerSettings, proxyless bool) {
	c.LbPolicy = clusterv3.Cluster_LEAST_REQUEST
	if proxyless {
		c.LbPolicy = clusterv3.Cluster_ROUND_ROBIN
	}
	if ch := lb.GetConsistentHash(); ch != nil {
		if m := ch.GetMaglev(); m != nil && !proxyless {
			c.LbPolicy = clusterv3.Cluster_MAGLEV
			if m.GetTableSize() > 0 {
				c.LbConfig = &clusterv3.Cluster_MaglevLbConfig_{MaglevLbConfig: &clusterv3.Cluster_MaglevLbConfig{TableSize: wrapperspb.UInt64(m.GetTableSize())}}
			}
			return
		}
		c.LbPolicy = clusterv3.Cluster_RING_HASH
		size := ch.GetRingHash().GetMinimumRingSize()
		if size == 0 {
			//lint:ignore SA1019 the deprecated setting is still honoured, as istiod does
			size = ch.GetMinimumRingSize()
		}
		if size == 0 {
			size = 1024 // Istio's default
		}
		c.LbConfig = &clusterv3.Cluster_RingHashLbConfig_{RingHashLbConfig: &clusterv3.Cluster_RingHashLbConfig{MinimumRingSize: wrapperspb.UInt64(size)}}
		return
	}
	switch lb.GetSimple() {
	case networking.LoadBalancerSettings_ROUND_ROBIN:
		c.LbPolicy = clusterv3.Cluster_ROUND_ROBIN
		if ss := slowStart(lb); ss != nil && !proxyless {
			c.LbConfig = &clusterv3.Cluster_RoundRobinLbConfig_{RoundRobinLbConfig: &clusterv3.Cluster_RoundRobinLbConfig{SlowStartConfig: ss}}
		}
	//lint:ignore SA1019 the deprecated setting is still honoured, as istiod does
	case networking.LoadBalancerSettings_LEAST_REQUEST, networking.LoadBalancerSettings_LEAST_CONN:
		c.LbPolicy = clusterv3.Cluster_LEAST_REQUEST
		if proxyless {
			c.LbPolicy = clusterv3.Cluster_ROUND_ROBIN // ignored beside load_balancing_policy
			c.LoadBalancingPolicy = leastRequestPolicies
		} else if ss := slowStart(lb); ss != nil {
			c.LbConfig = &clusterv3.Cluster_LeastRequestLbConfig_{LeastRequestLbConfig: &clusterv3.Cluster_LeastRequestLbConfig{SlowStartConfig: ss}}
		}
	case networking.LoadBalancerSettings_UNSPECIFIED: // Istio's default, LEAST_REQUEST
		if ss := slowStart(lb); ss != nil && !proxyless {
			c.LbConfig = &clusterv3.Cluster_LeastRequestLbConfig_{LeastRequestLbConfig: &clusterv3.Cluster_LeastRequestLbConfig{SlowStartConfig: ss}}
		}
	case networking.LoadBalancerSettings_RANDOM:
		if !proxyless {
			c.LbPolicy = clusterv3.Cluster_RANDOM
		}
	case networking.LoadBalancerSettings_PASSTHROUGH:
		if !proxyless {
			// Istio turns the cluster into ORIGINAL_DST.
			c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST}
			c.EdsClusterConfig, c.LoadAssignment = nil, nil
			c.LbPolicy = clusterv3.Cluster_CLUSTER_PROVIDED
		}
	}
}

// applyOutlier is istiod's applyOutlierDetection: success-rate ejection
// off; each consecutive-error kind set only when the field is (unset
// leaves Envoy's default, 5 errors enforced, as Istio); local-origin
// failures only with split errors; the panic threshold always set to
// minHealthPercent (0 by default turns panic mode off, as Istio).
func applyOutlier(c *clusterv3.Cluster, o *networking.OutlierDetection) {
	od := &clusterv3.OutlierDetection{
		Interval: o.GetInterval(), BaseEjectionTime: o.GetBaseEjectionTime(),
		EnforcingSuccessRate: gen.U32(0),
	}
	if e := o.GetConsecutive_5XxErrors(); e != nil {
		od.Consecutive_5Xx, od.EnforcingConsecutive_5Xx = gen.U32(e.GetValue()), gen.U32(enforcing(e.GetValue()))
	}
	if e := o.GetConsecutiveGatewayErrors(); e != nil {
		od.ConsecutiveGatewayFailure, od.EnforcingConsecutiveGatewayFailure = gen.U32(e.GetValue()), gen.U32(enforcing(e.GetValue()))
	}
	if n := o.GetMaxEjectionPercent(); n > 0 {
		od.MaxEjectionPercent = gen.U32(uint32(n))
	}
	if o.GetSplitExternalLocalOriginErrors() {
		od.SplitExternalLocalOriginErrors = true
		if n := o.GetConsecutiveLocalOriginFailures().GetValue(); n > 0 {
			od.ConsecutiveLocalOriginFailure, od.EnforcingConsecutiveLocalOriginFailure = gen.U32(n), gen.U32(100)
		}
		od.EnforcingLocalOriginSuccessRate = gen.U32(0)
	}
	c.OutlierDetection = od
	if n := o.GetMinHealthPercent(); n >= 0 {
		if c.CommonLbConfig == nil {
			c.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{}
		}
		c.CommonLbConfig.HealthyPanicThreshold = &typev3.Percent{Value: float64(n)}
	}
}

// enforcing is Istio's enforcement percentage for a consecutive-error
// count: 100, or 0 when the count is 0 (ejection off).
func enforcing(n uint32) uint32 {
	if n > 0 {
		return 100
	}
	return 0
}

// applyLocalityWeighted turns on Envoy's locality weighted load
// balancing, without which Envoy ignores the locality weights EDS sends,
// when istiod's applyLocalityLoadBalancer does: the setting distributes,
// or it has failover or failoverPriority rules and the cluster has
// outlier detection or failover is forced (a service's traffic
// distribution). Call it after applyOutlier.
func applyLocalityWeighted(c *clusterv3.Cluster, lb *networking.LocalityLoadBalancerSetting, force bool) {
	failover := (force || c.OutlierDetection != nil) && (lb.GetFailover() != nil || lb.GetFailoverPriority() != nil)
	if lb.GetDistribute() == nil && !failover {
		return
	}
	if c.CommonLbConfig == nil {
		c.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{}
	}
	c.CommonLbConfig.LocalityConfigSpecifier = &clusterv3.Cluster_CommonLbConfig_LocalityWeightedLbConfig_{
		LocalityWeightedLbConfig: &clusterv3.Cluster_CommonLbConfig_LocalityWeightedLbConfig{},
	}
}

// slowStart is the warmup of a ROUND_ROBIN or LEAST_REQUEST balancer, as
// istiod's setWarmup (aggression 1 and a 10% minimum weight unless set;
// the runtime key "(" is istiod's, a key no runtime has) or, for the
// deprecated warmupDurationSecs, the window alone; nil without either.
func slowStart(lb *networking.LoadBalancerSettings) *clusterv3.Cluster_SlowStartConfig {
	if w := lb.GetWarmup(); w != nil {
		aggression, minPercent := 1.0, 10.0
		if a := w.GetAggression(); a != nil {
			aggression = a.GetValue()
		}
		if m := w.GetMinimumPercent(); m != nil {
			minPercent = m.GetValue()
		}
		return &clusterv3.Cluster_SlowStartConfig{SlowStartWindow: w.GetDuration(),
			Aggression: &corev3.RuntimeDouble{DefaultValue: aggression, RuntimeKey: "("}, MinWeightPercent: &typev3.Percent{Value: minPercent}}
	}
	if d := lb.GetWarmupDurationSecs(); d != nil {
		return &clusterv3.Cluster_SlowStartConfig{SlowStartWindow: d}
	}
	return nil
}

// applyKeepalive sets the upstream TCP keepalive fields k sets (istiod's
// setKeepAliveSettings): an empty keepalive turns SO_KEEPALIVE on with
// the kernel's values.
func applyKeepalive(c *clusterv3.Cluster, k *networking.ConnectionPoolSettings_TCPSettings_TcpKeepalive) {
	if k == nil {
		return
	}
	if c.UpstreamConnectionOptions == nil {
		c.UpstreamConnectionOptions = &clusterv3.UpstreamConnectionOptions{TcpKeepalive: &corev3.TcpKeepalive{}}
	}
	ka := c.UpstreamConnectionOptions.TcpKeepalive
	if k.GetProbes() > 0 {
		ka.KeepaliveProbes = gen.U32(k.GetProbes())
	}
	if t := k.GetTime(); t != nil {
		ka.KeepaliveTime = gen.U32(uint32(t.GetSeconds()))
	}
	if i := k.GetInterval(); i != nil {
		ka.KeepaliveInterval = gen.U32(uint32(i.GetSeconds()))
	}
}
