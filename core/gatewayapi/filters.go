package gatewayapi

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/config/gwapi"
)

// Route filters: header modifiers, redirect, rewrite, mirror, CORS.

func headerOps(f *gwapi.HTTPHeaderFilter) (*networking.Headers_HeaderOperations, *routeError) {
	toMap := func(hs []gwapi.HTTPHeader) map[string]string {
		if len(hs) == 0 {
			return nil
		}
		m := map[string]string{}
		for _, h := range hs {
			k := strings.ToLower(h.Name)
			if _, ok := m[k]; !ok {
				m[k] = h.Value
			}
		}
		return m
	}
	for _, h := range append(append([]gwapi.HTTPHeader{}, f.Set...), f.Add...) {
		for _, b := range []byte(h.Value) {
			if b != '\t' && (b < 0x20 || b == 0x7f) {
				return nil, &routeError{reason: "UnsupportedValue", message: fmt.Sprintf("header %q value contains invalid characters", h.Name)}
			}
		}
	}
	return &networking.Headers_HeaderOperations{Add: toMap(f.Add), Set: toMap(f.Set), Remove: f.Remove}, nil
}

func (c *converter) applyFilters(hr *networking.HTTPRoute, r *config.Config, filters []gwapi.HTTPRouteFilter, mesh bool) *routeError {
	var backendErr *routeError
	for _, f := range filters {
		switch f.Type {
		case "RequestHeaderModifier", "ResponseHeaderModifier":
			src := f.RequestHeaderModifier
			if f.Type == "ResponseHeaderModifier" {
				src = f.ResponseHeaderModifier
			}
			if src == nil {
				continue
			}
			h, err := headerOps(src)
			if err != nil {
				return err
			}
			if hr.Headers == nil {
				hr.Headers = &networking.Headers{}
			}
			if f.Type == "RequestHeaderModifier" {
				hr.Headers.Request = h
			} else {
				hr.Headers.Response = h
			}
		case "RequestRedirect":
			hr.Redirect = redirect(f.RequestRedirect)
		case "URLRewrite":
			hr.Rewrite = rewrite(f.URLRewrite)
		case "CORS":
			if f.CORS != nil {
				hr.CorsPolicy = corsPolicy(f.CORS)
			}
		case "RequestMirror":
			m := f.RequestMirror
			one := int32(1)
			dst, err := c.destination(gwapi.BackendRef{BackendObjectReference: m.BackendRef, Weight: &one}, r, mesh)
			if err != nil {
				backendErr = err
				continue
			}
			mp := &networking.HTTPMirrorPolicy{Destination: dst}
			if fr := m.Fraction; fr != nil {
				mp.Percentage = &networking.Percent{Value: 100 * float64(fr.Numerator) / float64(gwapi.Deref(fr.Denominator, 100))}
			} else if m.Percent != nil {
				mp.Percentage = &networking.Percent{Value: float64(*m.Percent)}
			}
			hr.Mirrors = append(hr.Mirrors, mp)
		default:
			return &routeError{reason: "UnsupportedValue", message: fmt.Sprintf("unsupported filter type %q", f.Type)}
		}
	}
	return backendErr
}

func redirect(f *gwapi.HTTPRequestRedirectFilter) *networking.HTTPRedirect {
	out := &networking.HTTPRedirect{}
	if f.StatusCode != nil {
		out.RedirectCode = uint32(*f.StatusCode)
	}
	out.Authority = gwapi.Deref(f.Hostname, "")
	out.Scheme = gwapi.Deref(f.Scheme, "")
	switch {
	case f.Port != nil:
		out.RedirectPort = &networking.HTTPRedirect_Port{Port: uint32(*f.Port)}
	case f.Scheme != nil:
		out.RedirectPort = &networking.HTTPRedirect_DerivePort{DerivePort: networking.HTTPRedirect_FROM_PROTOCOL_DEFAULT}
	default:
		out.RedirectPort = &networking.HTTPRedirect_DerivePort{DerivePort: networking.HTTPRedirect_FROM_REQUEST_PORT}
	}
	if p := f.Path; p != nil {
		switch p.Type {
		case "ReplaceFullPath":
			out.Uri = gwapi.Deref(p.ReplaceFullPath, "")
		case "ReplacePrefixMatch":
			out.PrefixRewrite = gwapi.Deref(p.ReplacePrefixMatch, "")
		}
	}
	return out
}

func rewrite(f *gwapi.HTTPURLRewriteFilter) *networking.HTTPRewrite {
	out := &networking.HTTPRewrite{Authority: gwapi.Deref(f.Hostname, "")}
	if p := f.Path; p != nil {
		switch p.Type {
		case "ReplacePrefixMatch":
			if out.Uri = strings.TrimSuffix(gwapi.Deref(p.ReplacePrefixMatch, ""), "/"); out.Uri == "" {
				out.Uri = "/"
			}
		case "ReplaceFullPath":
			out.UriRegexRewrite = &networking.RegexRewrite{Match: "/.*", Rewrite: gwapi.Deref(p.ReplaceFullPath, "")}
		}
	}
	if out.Uri == "" && out.UriRegexRewrite == nil && out.Authority == "" {
		return nil
	}
	return out
}

// corsPolicy converts a CORS filter as istiod does: origin "*" becomes a
// regex of any well-formed origin, an origin without "*" an exact match,
// one trailing "*" a prefix, other wildcards a regex; preflights that
// match no origin pass to the backend (IGNORE). maxAge defaults to 5 s
// (the API server's default, which a file does not apply).
func corsPolicy(f *gwapi.HTTPCORSFilter) *networking.CorsPolicy {
	out := &networking.CorsPolicy{UnmatchedPreflights: networking.CorsPolicy_IGNORE}
	for _, o := range f.AllowOrigins {
		var m *networking.StringMatch
		switch {
		case o == "":
			continue
		case o == "*":
			m = &networking.StringMatch{MatchType: &networking.StringMatch_Regex{Regex: `^[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s?#]+$`}}
		case !strings.Contains(o, "*"):
			m = &networking.StringMatch{MatchType: &networking.StringMatch_Exact{Exact: o}}
		case strings.Count(o, "*") == 1 && strings.HasSuffix(o, "*"):
			m = &networking.StringMatch{MatchType: &networking.StringMatch_Prefix{Prefix: strings.TrimSuffix(o, "*")}}
		default:
			m = &networking.StringMatch{MatchType: &networking.StringMatch_Regex{Regex: "^" + strings.ReplaceAll(regexp.QuoteMeta(o), `\*`, ".*") + "$"}}
		}
		out.AllowOrigins = append(out.AllowOrigins, m)
	}
	if gwapi.Deref(f.AllowCredentials, false) {
		out.AllowCredentials = wrapperspb.Bool(true)
	}
	out.AllowMethods = f.AllowMethods
	out.AllowHeaders = f.AllowHeaders
	out.ExposeHeaders = f.ExposeHeaders
	age := f.MaxAge
	if age == 0 {
		age = 5
	}
	out.MaxAge = durationpb.New(time.Duration(age) * time.Second)
	return out
}
