package cds

import (
	"math"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/xdsserver/gen"
)

// Istio's circuit breaker thresholds (getDefaultCircuitBreakerThresholds
// in istiod's cluster_traffic_policy.go): every limit at its maximum,
// where Envoy's own defaults (1024 connections, pending and active
// requests, 3 parallel retries) trip during endpoint churn and give
// 503s. istiod sets them on every Envoy cluster it gives a connection
// pool to (outbound, inbound, PassthroughCluster and
// InboundPassthroughCluster; not BlackHoleCluster), and a
// DestinationRule's connectionPool replaces only the limits it sets.
// track_remaining stays off: istiod's DISABLE_TRACK_REMAINING_CB_METRICS
// defaults to true (the parity run against istiod shows it absent).
//
// Both are shared by every cluster without limits of its own and must
// never be altered.
var (
	unlimited              = wrapperspb.UInt32(math.MaxUint32)
	defaultCircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
		MaxConnections: unlimited, MaxPendingRequests: unlimited, MaxRequests: unlimited, MaxRetries: unlimited,
	}}}
)

// circuitBreakers maps a connection pool's limits onto Istio's defaults
// (defaultCircuitBreakers, shared when the pool sets none). A proxyless
// gRPC client gets only max_requests (gRFC A32: gRPC reads nothing else)
// and only when http2MaxRequests is set, as istiod's grpcgen; else nil.
func circuitBreakers(cp *networking.ConnectionPoolSettings, proxyless bool) *clusterv3.CircuitBreakers {
	t, h := cp.GetTcp(), cp.GetHttp()
	if proxyless {
		if n := h.GetHttp2MaxRequests(); n > 0 {
			return &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{MaxRequests: gen.U32(uint32(n))}}}
		}
		return nil
	}
	if t.GetMaxConnections() <= 0 && h.GetHttp1MaxPendingRequests() <= 0 && h.GetHttp2MaxRequests() <= 0 && h.GetMaxRetries() <= 0 {
		return defaultCircuitBreakers
	}
	th := &clusterv3.CircuitBreakers_Thresholds{
		MaxConnections: limit(t.GetMaxConnections()), MaxPendingRequests: limit(h.GetHttp1MaxPendingRequests()),
		MaxRequests: limit(h.GetHttp2MaxRequests()), MaxRetries: limit(h.GetMaxRetries()),
	}
	return &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{th}}
}

// limit is a connection pool limit, unlimited when not set (0: istiod
// cannot tell an explicit 0 from unset, and takes neither).
func limit(n int32) *wrapperspb.UInt32Value {
	if n <= 0 {
		return unlimited
	}
	return gen.U32(uint32(n))
}

// withRetryBudget is cb (not altered: it may be the shared default) with
// a DestinationRule's retryBudget on its threshold, as istiod's
// applyRetryBudget: budget 20% and at least 3 concurrent retries unless
// set, the interval as given. Envoy then bounds retries by the budget
// instead of max_retries.
func withRetryBudget(cb *clusterv3.CircuitBreakers, rb *networking.TrafficPolicy_RetryBudget) *clusterv3.CircuitBreakers {
	th := proto.Clone(cb.GetThresholds()[0]).(*clusterv3.CircuitBreakers_Thresholds)
	budget := &typev3.Percent{Value: 20}
	if p := rb.GetPercent(); p != nil {
		budget = &typev3.Percent{Value: p.GetValue()}
	}
	minConcurrency := uint32(3)
	if n := rb.GetMinRetryConcurrency(); n > 0 {
		minConcurrency = n
	}
	th.RetryBudget = &clusterv3.CircuitBreakers_Thresholds_RetryBudget{
		BudgetPercent: budget, BudgetInterval: rb.GetBudgetInterval(), MinRetryConcurrency: gen.U32(minConcurrency),
	}
	return &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{th}}
}
