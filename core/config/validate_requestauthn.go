package config

import (
	"encoding/json"
	"net/url"
	"strconv"

	security "istio.io/api/security/v1beta1"
)

// validateRequestAuthentication checks a RequestAuthentication with
// Istio's rules (pkg/config/validation ValidateRequestAuthentication):
// one of selector, targetRef and targetRefs; per JWT rule an issuer or a
// jwksUri, an http(s) jwksUri, inline jwks that is a JSON Web Key Set,
// non-empty audiences and token locations, outputClaimToHeaders with a
// claim and a valid header name, a positive timeout.
func validateRequestAuthentication(c *Config) Errors {
	var errs Errors
	ra := c.Spec.(*security.RequestAuthentication)
	checkMatchLabels(&errs, "spec.selector", ra.GetSelector())
	set := 0
	if ra.GetSelector() != nil {
		set++
	}
	if ra.GetTargetRef() != nil {
		set++
		checkTargetRef(&errs, "spec.targetRef", ra.GetTargetRef())
	}
	if len(ra.GetTargetRefs()) > 0 {
		set++
		for i, r := range ra.GetTargetRefs() {
			checkTargetRef(&errs, idx("spec.targetRefs", i), r)
		}
	}
	if set > 1 {
		errs.Add("spec.selector", "only one of selector, targetRef and targetRefs may be set")
	}
	for i, r := range ra.GetJwtRules() {
		f := idx("spec.jwtRules", i)
		if r == nil {
			errs.Add(f, "must not be null")
			continue
		}
		for j, a := range r.GetAudiences() {
			if a == "" {
				errs.Add(idx(f+".audiences", j), "must be a non-empty string")
			}
		}
		if r.GetIssuer() == "" && r.GetJwksUri() == "" {
			errs.Add(f+".issuer", "issuer or jwksUri must be set")
		}
		if u := r.GetJwksUri(); u != "" {
			p, err := url.Parse(u)
			switch {
			case err != nil:
				errs.Add(f+".jwksUri", "not a URL: %v", err)
			case p.Scheme != "http" && p.Scheme != "https":
				errs.Add(f+".jwksUri", "scheme must be http or https, got %q", p.Scheme)
			case p.Hostname() == "":
				errs.Add(f+".jwksUri", "has no host")
			}
		}
		if k := r.GetJwks(); k != "" {
			if msg := jwksError(k); msg != "" {
				errs.Add(f+".jwks", "%s", msg)
			}
		}
		for j, h := range r.GetFromHeaders() {
			if h == nil || h.GetName() == "" {
				errs.Add(idx(f+".fromHeaders", j)+".name", "must be a non-empty string")
			}
		}
		for j, p := range r.GetFromParams() {
			if p == "" {
				errs.Add(idx(f+".fromParams", j), "must be a non-empty string")
			}
		}
		for j, ck := range r.GetFromCookies() {
			if ck == "" {
				errs.Add(idx(f+".fromCookies", j), "must be a non-empty string")
			}
		}
		for j, ch := range r.GetOutputClaimToHeaders() {
			g := idx(f+".outputClaimToHeaders", j)
			if ch == nil || ch.GetClaim() == "" || ch.GetHeader() == "" {
				errs.Add(g, "header and claim must be non-empty strings")
				continue
			}
			checkHeaderName(&errs, g+".header", ch.GetHeader())
		}
		if r.GetTimeout() != nil {
			checkDuration(&errs, f+".timeout", r.GetTimeout())
		}
	}
	return errs
}

// jwksError says why s is not a JSON Web Key Set (RFC 7517: an object
// whose "keys" is an array of objects with a "kty"), "" if it is one.
func jwksError(s string) string {
	var doc struct {
		Keys *[]map[string]any `json:"keys"`
	}
	if err := json.Unmarshal([]byte(s), &doc); err != nil {
		return "not a JSON Web Key Set: " + err.Error()
	}
	if doc.Keys == nil {
		return `not a JSON Web Key Set: no "keys" array`
	}
	for i, k := range *doc.Keys {
		if kty, _ := k["kty"].(string); kty == "" {
			return "not a JSON Web Key Set: key " + strconv.Itoa(i) + ` has no "kty"`
		}
	}
	return ""
}
