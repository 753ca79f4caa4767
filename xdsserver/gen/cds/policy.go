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
// protocol options from a merged traffic policy.
func applyPolicy(c *clusterv3.Cluster, v *scope.View, p model.Port, policy *networking.TrafficPolicy, lb bool) {
	proxyless := v.Proxy.Proxyless
	if lb {
		applyLB(c, policy.GetLoadBalancer(), proxyless)
	}
	if od := policy.GetOutlierDetection(); od != nil && proxyless {
		c.OutlierDetection = grpcOutlier(od)
	} else if od != nil {
		applyOutlier(c, od)
	}
	applyLocalityWeighted(c, scope.LocalityLbSetting(v.Push, policy))
	if cb := circuitBreakers(policy.GetConnectionPool()); cb != nil {
		c.CircuitBreakers = cb
	}
	c.TypedExtensionProtocolOptions = protocolOptions(p, policy, proxyless)
}

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
	case networking.LoadBalancerSettings_LEAST_REQUEST, networking.LoadBalancerSettings_LEAST_CONN:
		c.LbPolicy = clusterv3.Cluster_LEAST_REQUEST
		if proxyless {
			c.LbPolicy = clusterv3.Cluster_ROUND_ROBIN // ignored beside load_balancing_policy
			c.LoadBalancingPolicy = leastRequestPolicies
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

func applyOutlier(c *clusterv3.Cluster, o *networking.OutlierDetection) {
	od := &clusterv3.OutlierDetection{
		Interval: o.GetInterval(), BaseEjectionTime: o.GetBaseEjectionTime(),
		EnforcingConsecutive_5Xx:               gen.U32(0),
		EnforcingConsecutiveGatewayFailure:     gen.U32(0),
		EnforcingSuccessRate:                   gen.U32(0),
		EnforcingConsecutiveLocalOriginFailure: gen.U32(0),
	}
	if e := o.GetConsecutive_5XxErrors(); e != nil {
		od.Consecutive_5Xx = gen.U32(e.GetValue())
		if e.GetValue() > 0 {
			od.EnforcingConsecutive_5Xx = gen.U32(100)
		}
	} else if n := o.GetConsecutiveErrors(); n > 0 { //nolint:staticcheck // deprecated, still honoured by Istio
		od.Consecutive_5Xx = gen.U32(uint32(n))
		od.EnforcingConsecutive_5Xx = gen.U32(100)
	}
	if e := o.GetConsecutiveGatewayErrors(); e != nil {
		od.ConsecutiveGatewayFailure = gen.U32(e.GetValue())
		if e.GetValue() > 0 {
			od.EnforcingConsecutiveGatewayFailure = gen.U32(100)
		}
	}
	if n := o.GetConsecutiveLocalOriginFailures(); n != nil {
		od.ConsecutiveLocalOriginFailure = gen.U32(n.GetValue())
		od.EnforcingConsecutiveLocalOriginFailure = gen.U32(100)
		od.SplitExternalLocalOriginErrors = o.GetSplitExternalLocalOriginErrors()
	}
	if n := o.GetMaxEjectionPercent(); n > 0 {
		od.MaxEjectionPercent = gen.U32(uint32(n))
	}
	c.OutlierDetection = od
	if n := o.GetMinHealthPercent(); n > 0 {
		c.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: float64(n)}}
	}
}

// applyLocalityWeighted turns on Envoy's locality weighted load
// balancing, without which Envoy ignores the locality weights EDS sends,
// when istiod's applyLocalityLoadBalancer does: the setting distributes,
// or it has failover or failoverPriority rules and the cluster has
// outlier detection. Call it after applyOutlier.
func applyLocalityWeighted(c *clusterv3.Cluster, lb *networking.LocalityLoadBalancerSetting) {
	failover := c.OutlierDetection != nil && (lb.GetFailover() != nil || lb.GetFailoverPriority() != nil)
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

// circuitBreakers maps the connection pool limits; nil when none is set.
func circuitBreakers(cp *networking.ConnectionPoolSettings) *clusterv3.CircuitBreakers {
	t, h := cp.GetTcp(), cp.GetHttp()
	th := &clusterv3.CircuitBreakers_Thresholds{Priority: corev3.RoutingPriority_DEFAULT}
	set := false
	if n := t.GetMaxConnections(); n > 0 {
		th.MaxConnections, set = gen.U32(uint32(n)), true
	}
	if n := h.GetHttp1MaxPendingRequests(); n > 0 {
		th.MaxPendingRequests, set = gen.U32(uint32(n)), true
	}
	if n := h.GetHttp2MaxRequests(); n > 0 {
		th.MaxRequests, set = gen.U32(uint32(n)), true
	}
	if n := h.GetMaxRetries(); n > 0 {
		th.MaxRetries, set = gen.U32(uint32(n)), true
	}
	if !set {
		return nil
	}
	return &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{th}}
}
