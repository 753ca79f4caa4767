package cds

import (
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	leastrequestv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/least_request/v3"
	roundrobinv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	wrrlocalityv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/wrr_locality/v3"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/xdsserver/gen"
)

// leastRequestPolicies is a proxyless client's LEAST_REQUEST (and
// LEAST_CONN): Cluster.load_balancing_policy (gRFC A52), of which a
// client takes the first policy it implements. Locality weighted round
// robin over least_request, or round_robin where the client has no
// least_request: grpc-go has it; C-core and @grpc/grpc-js-xds do not,
// and NACK the legacy lb_policy LEAST_REQUEST. wrr_locality is what gRPC
// builds from lb_policy ROUND_ROBIN itself. Shared, never altered.
var leastRequestPolicies = &clusterv3.LoadBalancingPolicy{Policies: []*clusterv3.LoadBalancingPolicy_Policy{
	lbPolicy("envoy.load_balancing_policies.wrr_locality", &wrrlocalityv3.WrrLocality{
		EndpointPickingPolicy: &clusterv3.LoadBalancingPolicy{Policies: []*clusterv3.LoadBalancingPolicy_Policy{
			lbPolicy("envoy.load_balancing_policies.least_request", &leastrequestv3.LeastRequest{}),
			lbPolicy("envoy.load_balancing_policies.round_robin", &roundrobinv3.RoundRobin{}),
		}},
	}),
}}

func lbPolicy(name string, m proto.Message) *clusterv3.LoadBalancingPolicy_Policy {
	return &clusterv3.LoadBalancingPolicy_Policy{TypedExtensionConfig: &corev3.TypedExtensionConfig{Name: name, TypedConfig: gen.MustAny(m)}}
}

// Failure-percentage ejection as proxyless clients get it for Istio's
// consecutive error counts (see grpcOutlier).
const (
	// grpcFailurePercent is the share of failed RPCs in one interval above
	// which a backend is ejected: Envoy's and gRPC's own default. gRPC
	// counts every non-OK status as a failure where Envoy counts 5xx
	// only, so a lower threshold would eject backends for errors the
	// application means.
	grpcFailurePercent = 85
	// istioConsecutive5xx is Istio's default consecutive5xxErrors.
	istioConsecutive5xx = 5
)

// grpcOutlier maps Istio's outlier detection for proxyless gRPC clients,
// which implement success-rate and failure-percentage ejection only
// (gRFC A50) and ignore the consecutive error counts Envoy acts on.
// Istio's smallest consecutive error count N (consecutive5xxErrors, 5 when
// unset as in Istio, or the deprecated consecutiveErrors;
// consecutiveGatewayErrors; consecutiveLocalOriginFailures when
// splitExternalLocalOriginErrors is set) becomes
// failure-percentage ejection: a backend that received at least N RPCs in
// one interval and failed more than 85% of them is ejected, even when it
// is the only one (minimum hosts 1, as Envoy ejects a lone host after N
// errors). Interval, base ejection time and maximum ejection percent pass
// through; success-rate ejection stays off, as Istio keeps it. All counts
// zero: no ejection, and no outlier_detection at all.
func grpcOutlier(o *networking.OutlierDetection) *clusterv3.OutlierDetection {
	n := uint32(0)
	lower := func(v uint32) {
		if v > 0 && (n == 0 || v < n) {
			n = v
		}
	}
	switch {
	case o.GetConsecutive_5XxErrors() != nil:
		lower(o.GetConsecutive_5XxErrors().GetValue())
	//lint:ignore SA1019 deprecated, still honoured
	case o.GetConsecutiveErrors() > 0:
		//lint:ignore SA1019 deprecated, still honoured
		lower(uint32(o.GetConsecutiveErrors()))
	default:
		lower(istioConsecutive5xx)
	}
	lower(o.GetConsecutiveGatewayErrors().GetValue())
	if o.GetSplitExternalLocalOriginErrors() { // Istio reads the count only then
		lower(o.GetConsecutiveLocalOriginFailures().GetValue())
	}
	if n == 0 {
		return nil
	}
	od := &clusterv3.OutlierDetection{
		Interval: o.GetInterval(), BaseEjectionTime: o.GetBaseEjectionTime(),
		EnforcingSuccessRate:           gen.U32(0),
		FailurePercentageThreshold:     gen.U32(grpcFailurePercent),
		EnforcingFailurePercentage:     gen.U32(100),
		FailurePercentageMinimumHosts:  gen.U32(1),
		FailurePercentageRequestVolume: gen.U32(n),
	}
	if p := o.GetMaxEjectionPercent(); p > 0 {
		od.MaxEjectionPercent = gen.U32(uint32(p))
	}
	return od
}
