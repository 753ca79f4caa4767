package rds

import (
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/xdsserver/gen"
)

// CORSFilterName is the HTTP CORS filter's name, the key of its
// per-route config. Sidecar and gateway connection managers always carry
// the filter, as Istio's do; proxyless clients get neither.
const CORSFilterName = "envoy.filters.http.cors"

// corsEnabled is the CORS filter enabled for every request, as Istio
// writes it; shared by every policy and never altered.
var corsEnabled = &corev3.RuntimeFractionalPercent{
	DefaultValue: &typev3.FractionalPercent{Numerator: 100, Denominator: typev3.FractionalPercent_HUNDRED},
}

// corsPolicy is the per-route config of the CORS filter for a
// VirtualService CORS policy (Istio's TranslateCORSPolicy).
func corsPolicy(in *networking.CorsPolicy) *corsv3.CorsPolicy {
	out := &corsv3.CorsPolicy{
		FilterEnabled:    corsEnabled,
		AllowCredentials: in.GetAllowCredentials(),
		AllowMethods:     strings.Join(in.GetAllowMethods(), ","),
		AllowHeaders:     strings.Join(in.GetAllowHeaders(), ","),
		ExposeHeaders:    strings.Join(in.GetExposeHeaders(), ","),
		// Envoy before 1.30 forwarded preflights matching no origin;
		// Istio keeps that unless told to ignore them.
		ForwardNotMatchingPreflights: gen.Bool(in.GetUnmatchedPreflights() != networking.CorsPolicy_IGNORE),
	}
	if in.GetAllowOrigins() != nil {
		out.AllowOriginStringMatch = make([]*matcherv3.StringMatcher, 0, len(in.GetAllowOrigins()))
		for _, o := range in.GetAllowOrigins() {
			if m := stringMatcher(o); m != nil {
				out.AllowOriginStringMatch = append(out.AllowOriginStringMatch, m)
			}
		}
	} else {
		//lint:ignore SA1019 deprecated, still honoured
		for _, o := range in.GetAllowOrigin() {
			out.AllowOriginStringMatch = append(out.AllowOriginStringMatch, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: o}})
		}
	}
	if ma := in.GetMaxAge(); ma != nil {
		out.MaxAge = strconv.FormatInt(ma.GetSeconds(), 10)
	}
	return out
}
