package config

// The parts of an HTTP route rule besides matches and destinations:
// header operations, CORS, fault injection, redirect, retries, rewrite.

import (
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1alpha3"
)

// supportedMethods are the CORS methods Istio accepts.
var supportedMethods = map[string]bool{
	"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true,
	"DELETE": true, "CONNECT": true, "OPTIONS": true, "TRACE": true,
}

// retryOnPolicies are Envoy's x-envoy-retry-on and x-envoy-retry-grpc-on
// values; a status code is also allowed.
var retryOnPolicies = map[string]bool{
	"5xx": true, "gateway-error": true, "reset": true, "reset-before-request": true, "connect-failure": true,
	"envoy-ratelimited": true, "retriable-4xx": true, "refused-stream": true, "retriable-status-codes": true,
	"retriable-headers": true, "http3-post-connect-failure": true,
	"cancelled": true, "deadline-exceeded": true, "internal": true, "resource-exhausted": true, "unavailable": true,
}

// checkHeaderOps checks header operations as Istio does: a request's set
// and add may name the authority (":authority" or "host", which become a
// host rewrite); no other operation may name it or another ":" pseudo
// header.
func checkHeaderOps(errs *Errors, f string, h *networking.Headers) {
	for _, op := range []struct {
		name      string
		ops       *networking.Headers_HeaderOperations
		authority bool
	}{{"request", h.GetRequest(), true}, {"response", h.GetResponse(), false}} {
		of := f + "." + op.name
		for name := range op.ops.GetSet() {
			checkHeaderOpName(errs, mapKey(of+".set", name), name, op.authority)
		}
		for name := range op.ops.GetAdd() {
			checkHeaderOpName(errs, mapKey(of+".add", name), name, op.authority)
		}
		for i, name := range op.ops.GetRemove() {
			checkHeaderOpName(errs, idx(of+".remove", i), name, false)
		}
	}
}

func checkHeaderOpName(errs *Errors, field, name string, authority bool) {
	switch {
	case authority && (name == ":authority" || strings.EqualFold(name, "host")):
	case strings.EqualFold(name, "host"):
		errs.Add(field, "the Host header can only be set or added on requests (as a host rewrite)")
	case strings.HasPrefix(name, ":"):
		if authority {
			errs.Add(field, "header %q: only :authority of the \":\" pseudo headers can be set", name)
		} else {
			errs.Add(field, "header %q: a header operation cannot name a \":\" pseudo header", name)
		}
	default:
		checkHeaderName(errs, field, name)
	}
}

func checkCORS(errs *Errors, f string, c *networking.CorsPolicy) {
	if c == nil {
		return
	}
	for i, o := range c.GetAllowOrigins() {
		checkStringMatch(errs, idx(f+".allowOrigins", i), o, false, false)
	}
	for i, m := range c.GetAllowMethods() {
		if !supportedMethods[m] {
			errs.Add(idx(f+".allowMethods", i), "%q is not a supported HTTP method", m)
		}
	}
	for i, h := range c.GetAllowHeaders() {
		if h != "*" {
			checkHeaderName(errs, idx(f+".allowHeaders", i), h)
		}
	}
	for i, h := range c.GetExposeHeaders() {
		if h != "*" {
			checkHeaderName(errs, idx(f+".exposeHeaders", i), h)
		}
	}
	if ma := c.GetMaxAge(); ma != nil {
		if err := ma.CheckValid(); err != nil {
			errs.Add(f+".maxAge", "invalid duration: %v", err)
		} else if ma.GetNanos() != 0 {
			errs.Add(f+".maxAge", "maxAge is applied in whole seconds")
		}
	}
}

func checkFault(errs *Errors, f string, fault *networking.HTTPFaultInjection) {
	if fault == nil {
		return
	}
	if fault.GetAbort() == nil && fault.GetDelay() == nil {
		errs.Add(f, "fault injection needs an abort, a delay or both")
	}
	if a := fault.GetAbort(); a != nil {
		checkPercentage(errs, f+".abort.percentage", a.GetPercentage())
		switch t := a.GetErrorType().(type) {
		case *networking.HTTPFaultInjection_Abort_HttpStatus:
			if t.HttpStatus < 200 || t.HttpStatus > 599 {
				errs.Add(f+".abort.httpStatus", "HTTP status %d is not in the range 200..599", t.HttpStatus)
			}
		case *networking.HTTPFaultInjection_Abort_GrpcStatus:
			if t.GrpcStatus == "" {
				errs.Add(f+".abort.grpcStatus", "must not be empty")
			}
		case nil:
			errs.Add(f+".abort", "one of httpStatus or grpcStatus is required")
		}
	}
	if d := fault.GetDelay(); d != nil {
		//lint:ignore SA1019 the deprecated field is still validated, as istiod does
		checkPercent(errs, f+".delay.percent", d.GetPercent())
		checkPercentage(errs, f+".delay.percentage", d.GetPercentage())
		switch t := d.GetHttpDelayType().(type) {
		case *networking.HTTPFaultInjection_Delay_FixedDelay:
			checkDuration(errs, f+".delay.fixedDelay", t.FixedDelay)
		case *networking.HTTPFaultInjection_Delay_ExponentialDelay:
			checkDuration(errs, f+".delay.exponentialDelay", t.ExponentialDelay)
		case nil:
			errs.Add(f+".delay.fixedDelay", "fixedDelay is required")
		}
	}
}

func checkRedirect(errs *Errors, f string, r *networking.HTTPRedirect) {
	if r == nil {
		return
	}
	if r.GetUri() == "" && r.GetAuthority() == "" && r.GetRedirectPort() == nil && r.GetScheme() == "" &&
		r.GetRedirectCode() == 0 && r.GetPrefixRewrite() == "" {
		errs.Add(f, "a redirect needs at least one of uri, authority, port, scheme, redirectCode or prefixRewrite")
	}
	if r.GetUri() != "" && r.GetPrefixRewrite() != "" {
		errs.Add(f, "only one of uri and prefixRewrite may be set")
	}
	if c := r.GetRedirectCode(); c != 0 && (c < 300 || c > 399) {
		errs.Add(f+".redirectCode", "%d is not a redirect code (3xx)", c)
	}
	if p, ok := r.GetRedirectPort().(*networking.HTTPRedirect_Port); ok {
		checkPort(errs, f+".port", p.Port)
	}
	if s := r.GetScheme(); s != "" && s != "http" && s != "https" {
		errs.Add(f+".scheme", "scheme %q is neither http nor https", s)
	}
}

func checkRetries(errs *Errors, f string, r *networking.HTTPRetry) {
	if r == nil {
		return
	}
	if r.GetAttempts() < 0 {
		errs.Add(f+".attempts", "attempts %d must not be negative", r.GetAttempts())
	}
	checkDuration(errs, f+".perTryTimeout", r.GetPerTryTimeout())
	checkDuration(errs, f+".backoff", r.GetBackoff())
	if r.GetRetryOn() != "" {
		for _, p := range strings.Split(r.GetRetryOn(), ",") {
			p = strings.TrimSpace(p)
			if retryOnPolicies[p] {
				continue
			}
			if n, err := strconv.Atoi(p); err == nil && n >= 100 && n <= 599 {
				continue
			}
			errs.Add(f+".retryOn", "%q is neither a retry policy nor an HTTP status code", p)
		}
	}
}

func checkRewrite(errs *Errors, f string, r *networking.HTTPRewrite) {
	if r == nil {
		return
	}
	rr := r.GetUriRegexRewrite()
	if r.GetUri() != "" && rr != nil {
		errs.Add(f, "only one of uri and uriRegexRewrite may be set")
	}
	if r.GetUri() == "" && r.GetAuthority() == "" && rr == nil {
		errs.Add(f, "a rewrite needs uri, authority or uriRegexRewrite")
	}
	if rr != nil {
		checkRegex(errs, f+".uriRegexRewrite.match", rr.GetMatch())
	}
}
