package rds

import (
	"net/http"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	faultcommonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/fault/v3"
	faultv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	previoushostsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	previousprioritiesv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/priority/previous_priorities/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// FaultFilterName is the HTTP fault filter's name, the key of its
// per-route config.
const FaultFilterName = "envoy.filters.http.fault"

// Istio's default retry policy for Envoy routes.
const defaultRetryOn = "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes"

// previousHosts is Istio's retry host predicate, packed once. Like
// defaultRetryPolicy it is shared by every route of every output and
// never altered: outputs are only marshalled.
var previousHosts = []*routev3.RetryPolicy_RetryHostPredicate{{
	Name:       "envoy.retry_host_predicates.previous_hosts",
	ConfigType: &routev3.RetryPolicy_RetryHostPredicate_TypedConfig{TypedConfig: gen.MustAny(&previoushostsv3.PreviousHostsPredicate{})},
}}

// defaultRetryPolicy is shared (see previousHosts); a route with its own
// retries gets a new policy from retry.
var defaultRetryPolicy = &routev3.RetryPolicy{
	RetryOn: defaultRetryOn, NumRetries: gen.U32(2),
	RetryHostPredicate: previousHosts, HostSelectionRetryMaxAttempts: 5,
}

// noValidate is ValidateClusters false, shared by every route config and
// never altered.
var noValidate = gen.Bool(false)

// notSampled is a mirror policy's trace_sampled false, shared and never
// altered.
var notSampled = gen.Bool(false)

// noTimeout is the zero route timeout (none), shared and never altered.
var noTimeout = gen.Duration(0)

// retry maps HTTPRetry for Envoy as istiod's retry.ConvertPolicy: nil
// keeps Istio's default policy, zero attempts disables retries; status
// codes in retryOn become retriable_status_codes; a route that hashes
// (hashed: consistent hash load balancing) does not avoid previous hosts
// unless retryIgnorePreviousHosts says so.
func retry(r *networking.HTTPRetry, hashed bool) *routev3.RetryPolicy {
	if r == nil {
		if hashed {
			return defaultHashRetryPolicy
		}
		return defaultRetryPolicy
	}
	if r.GetAttempts() <= 0 {
		return nil
	}
	p := &routev3.RetryPolicy{
		RetryOn: defaultRetryOn, NumRetries: gen.U32(uint32(r.GetAttempts())),
		RetryHostPredicate: previousHosts, HostSelectionRetryMaxAttempts: 5,
		PerTryTimeout: r.GetPerTryTimeout(),
	}
	if hashed {
		p.RetryHostPredicate = nil
	}
	if on := r.GetRetryOn(); on != "" {
		p.RetryOn, p.RetriableStatusCodes = parseRetryOn(on)
		if len(p.RetriableStatusCodes) > 0 && !strings.Contains(p.RetryOn, "retriable-status-codes") {
			p.RetryOn += ",retriable-status-codes"
		}
	}
	if ign := r.GetRetryIgnorePreviousHosts(); ign != nil {
		p.RetryHostPredicate = nil
		if ign.GetValue() {
			p.RetryHostPredicate = previousHosts
		}
	}
	if r.GetRetryRemoteLocalities().GetValue() {
		p.RetryPriority = previousPriorities
	}
	if b := r.GetBackoff(); b != nil {
		p.RetryBackOff = &routev3.RetryPolicy_RetryBackOff{BaseInterval: b}
	}
	return p
}

// parseRetryOn splits retryOn into Envoy's retry_on conditions and the
// HTTP status codes among them, as istiod's parseRetryOn.
func parseRetryOn(on string) (string, []uint32) {
	var conds []string
	var codes []uint32
	for _, part := range strings.Split(on, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if n, err := strconv.Atoi(part); err == nil && http.StatusText(n) != "" {
			codes = append(codes, uint32(n))
			continue
		}
		conds = append(conds, part)
	}
	return strings.Join(conds, ","), codes
}

// Shared, never altered: the default policy of a route that hashes
// (istiod's cachedDefaultConsistentHashPolicy), and retryRemoteLocalities'
// priority (previous priorities, updated every 2 attempts).
var (
	defaultHashRetryPolicy = &routev3.RetryPolicy{RetryOn: defaultRetryOn, NumRetries: gen.U32(2), HostSelectionRetryMaxAttempts: 5}
	previousPriorities     = &routev3.RetryPolicy_RetryPriority{
		Name: "envoy.retry_priorities.previous_priorities",
		ConfigType: &routev3.RetryPolicy_RetryPriority_TypedConfig{
			TypedConfig: gen.MustAny(&previousprioritiesv3.PreviousPrioritiesConfig{UpdateFrequency: 2}),
		},
	}
)

// percent is an Istio percentage as a fraction per million (def percent
// when unset).
func percent(p *networking.Percent, def float64) *typev3.FractionalPercent {
	v := def
	if p != nil {
		v = p.GetValue()
	}
	return &typev3.FractionalPercent{Numerator: uint32(v * 10000), Denominator: typev3.FractionalPercent_MILLION}
}

// fault is the per-route config of the fault filter.
func fault(f *networking.HTTPFaultInjection) *faultv3.HTTPFault {
	out := &faultv3.HTTPFault{}
	if d := f.GetDelay(); d != nil {
		fd := &faultcommonv3.FaultDelay{Percentage: percent(d.GetPercentage(), 100)}
		//lint:ignore SA1019 deprecated, still honoured
		if d.GetPercentage() == nil && d.GetPercent() > 0 {
			//lint:ignore SA1019 the deprecated field is still honoured, as istiod does
			fd.Percentage = &typev3.FractionalPercent{Numerator: uint32(d.GetPercent()), Denominator: typev3.FractionalPercent_HUNDRED}
		}
		if fixed := d.GetFixedDelay(); fixed != nil {
			fd.FaultDelaySecifier = &faultcommonv3.FaultDelay_FixedDelay{FixedDelay: fixed}
		}
		out.Delay = fd
	}
	if a := f.GetAbort(); a != nil {
		fa := &faultv3.FaultAbort{Percentage: percent(a.GetPercentage(), 100)}
		switch {
		case a.GetGrpcStatus() != "":
			fa.ErrorType = &faultv3.FaultAbort_GrpcStatus{GrpcStatus: grpcCode(a.GetGrpcStatus())}
		default:
			fa.ErrorType = &faultv3.FaultAbort_HttpStatus{HttpStatus: uint32(a.GetHttpStatus())}
		}
		out.Abort = fa
	}
	return out
}

// grpcCodes maps gRPC status names to codes.
var grpcCodes = map[string]uint32{
	"OK": 0, "CANCELLED": 1, "UNKNOWN": 2, "INVALID_ARGUMENT": 3, "DEADLINE_EXCEEDED": 4, "NOT_FOUND": 5,
	"ALREADY_EXISTS": 6, "PERMISSION_DENIED": 7, "RESOURCE_EXHAUSTED": 8, "FAILED_PRECONDITION": 9,
	"ABORTED": 10, "OUT_OF_RANGE": 11, "UNIMPLEMENTED": 12, "INTERNAL": 13, "UNAVAILABLE": 14,
	"DATA_LOSS": 15, "UNAUTHENTICATED": 16,
}

func grpcCode(s string) uint32 {
	if c, ok := grpcCodes[strings.ToUpper(s)]; ok {
		return c
	}
	return 2 // UNKNOWN
}

var redirectCodes = map[uint32]routev3.RedirectAction_RedirectResponseCode{
	301: routev3.RedirectAction_MOVED_PERMANENTLY, 302: routev3.RedirectAction_FOUND,
	303: routev3.RedirectAction_SEE_OTHER, 307: routev3.RedirectAction_TEMPORARY_REDIRECT,
	308: routev3.RedirectAction_PERMANENT_REDIRECT,
}

// redirect is an HTTP redirect on listener port (of a TLS server when
// tls), as istiod's ApplyRedirect: derivePort FROM_REQUEST_PORT is the
// listener's port (Envoy cannot take the request's; a route config
// serves one port), FROM_PROTOCOL_DEFAULT leaves the port to Envoy (the
// scheme's default); a port that is its scheme's default (80 for http,
// 443 for https; the scheme is the server's unless the redirect sets
// one) is left out of the Location. Before, derivePort was ignored, so
// FROM_REQUEST_PORT sent clients to the scheme's default port.
func redirect(r *networking.HTTPRedirect, port uint32, tls bool) *routev3.RedirectAction {
	// The path is set even when empty (Envoy then keeps the request's),
	// as istiod sets it.
	ra := &routev3.RedirectAction{HostRedirect: r.GetAuthority(), ResponseCode: redirectCodes[r.GetRedirectCode()],
		PathRewriteSpecifier: &routev3.RedirectAction_PathRedirect{PathRedirect: r.GetUri()}}
	if s := r.GetScheme(); s != "" {
		ra.SchemeRewriteSpecifier = &routev3.RedirectAction_SchemeRedirect{SchemeRedirect: s}
	}
	if r.GetRedirectPort() == nil {
		return ra
	}
	switch rp := r.GetRedirectPort().(type) {
	case *networking.HTTPRedirect_DerivePort:
		if rp.DerivePort == networking.HTTPRedirect_FROM_REQUEST_PORT {
			ra.PortRedirect = port
		}
	case *networking.HTTPRedirect_Port:
		ra.PortRedirect = rp.Port
	}
	scheme := r.GetScheme()
	if scheme == "" {
		scheme = "http"
		if tls {
			scheme = "https"
		}
	}
	if ra.PortRedirect == 80 && scheme == "http" || ra.PortRedirect == 443 && scheme == "https" {
		ra.PortRedirect = 0
	}
	return ra
}

// redirectPorted reports whether hr redirects with a port setting, whose
// output then depends on the listener port and the server's TLS.
func redirectPorted(hr *networking.HTTPRoute) bool { return hr.GetRedirect().GetRedirectPort() != nil }

func directResponse(d *networking.HTTPDirectResponse) *routev3.DirectResponseAction {
	out := &routev3.DirectResponseAction{Status: d.GetStatus()}
	switch b := d.GetBody().GetSpecifier().(type) {
	case *networking.HTTPBody_String_:
		out.Body = &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: b.String_}}
	case *networking.HTTPBody_Bytes:
		out.Body = &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b.Bytes}}
	}
	return out
}

// hashPolicy is the route hash policy a DestinationRule's consistent
// hash asks for, for the destination service (nil: none visible), port
// and subset.
func (b *routeBuilder) hashPolicy(svc *model.Service, port uint32, subset string) []*routev3.RouteAction_HashPolicy {
	if svc == nil {
		return nil
	}
	dr := b.v.DestinationRule(svc)
	if dr == nil {
		return nil
	}
	ch := scope.LoadBalancer(dr, port, subset).GetConsistentHash()
	if ch == nil {
		return nil
	}
	hp := &routev3.RouteAction_HashPolicy{}
	switch {
	case ch.GetHttpHeaderName() != "":
		hp.PolicySpecifier = &routev3.RouteAction_HashPolicy_Header_{Header: &routev3.RouteAction_HashPolicy_Header{HeaderName: ch.GetHttpHeaderName()}}
	case ch.GetHttpCookie() != nil:
		c := ch.GetHttpCookie()
		hp.PolicySpecifier = &routev3.RouteAction_HashPolicy_Cookie_{Cookie: &routev3.RouteAction_HashPolicy_Cookie{Name: c.GetName(), Path: c.GetPath(), Ttl: c.GetTtl()}}
	case ch.GetUseSourceIp():
		// gRPC ignores it (it hashes on headers and filter state); istiod
		// sends it to proxyless clients too.
		hp.PolicySpecifier = &routev3.RouteAction_HashPolicy_ConnectionProperties_{ConnectionProperties: &routev3.RouteAction_HashPolicy_ConnectionProperties{SourceIp: true}}
	case ch.GetHttpQueryParameterName() != "":
		hp.PolicySpecifier = &routev3.RouteAction_HashPolicy_QueryParameter_{QueryParameter: &routev3.RouteAction_HashPolicy_QueryParameter{Name: ch.GetHttpQueryParameterName()}}
	default:
		return nil
	}
	return []*routev3.RouteAction_HashPolicy{hp}
}
