package config

// Checks shared by the kinds: host names, addresses, ports, protocols,
// durations, labels, selectors, percentages and exportTo. Each takes the
// path of the field it checks and records failures in an *Errors, so the
// per-kind validators read as a list of fields.
//
// The rules follow istio/istio pkg/config/validation (and its agent
// subpackage); where baremesh differs, the comment says so.

import (
	"fmt"
	"net/netip"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	networking "istio.io/api/networking/v1alpha3"
	typev1beta1 "istio.io/api/type/v1beta1"
)

// unixAddressPrefix marks a Unix domain socket address in endpoints and
// binds.
const unixAddressPrefix = "unix://"

func idx(p string, i int) string        { return p + "[" + strconv.Itoa(i) + "]" }
func mapKey(p, k string) string         { return p + "[" + k + "]" }
func portKey(p string, n uint32) string { return p + "[" + strconv.FormatUint(uint64(n), 10) + "]" }

// Istio's DNS-1123 label allows upper case (pkg/config/labels), unlike
// Kubernetes object names.
var (
	istioDNSLabel    = regexp.MustCompile(`^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$`)
	wildcardDNSLabel = regexp.MustCompile(`^(\*|(\*|\*-)?[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)$`)
	labelNameRE      = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	httpTokenRE      = regexp.MustCompile("^[!#$%&'*+\\-.^_`|~0-9A-Za-z]+$")
)

func isDNSLabel(s string) bool { return len(s) <= 63 && istioDNSLabel.MatchString(s) }

// isNamespace reports whether s can name a Kubernetes namespace.
func isNamespace(s string) bool { return len(s) <= 63 && dns1123Label.MatchString(s) }

func checkDomainLength(name string) string {
	if name == "" {
		return "must not be empty"
	}
	if len(name) > 255 {
		return fmt.Sprintf("domain name %q is longer than 255 characters", name)
	}
	return ""
}

// dnsLabelsError checks the dot-separated labels of domain; one trailing
// dot ("istio.io.") is allowed, as in Istio.
func dnsLabelsError(domain string) string {
	parts := strings.Split(domain, ".")
	tld := parts[len(parts)-1]
	if _, err := strconv.Atoi(tld); err == nil {
		return fmt.Sprintf("domain name %q is invalid: the top level domain %q cannot be all digits", domain, tld)
	}
	for i, label := range parts {
		if i == len(parts)-1 && label == "" && i > 0 {
			return ""
		}
		if !isDNSLabel(label) {
			return fmt.Sprintf("domain name %q is invalid: label %q is not a DNS-1123 label (letters, digits and '-', at most 63)", domain, label)
		}
	}
	return ""
}

// fqdnError returns why name is not a domain name, or "". Short names
// ("reviews") are allowed: Istio expands them with the namespace.
func fqdnError(name string) string {
	if e := checkDomainLength(name); e != "" {
		return e
	}
	return dnsLabelsError(name)
}

// wildcardDomainError is fqdnError that also allows a wildcard in the
// first label: "*", "*.example.com", "*foo.example.com".
func wildcardDomainError(name string) string {
	if e := checkDomainLength(name); e != "" {
		return e
	}
	first, rest, more := strings.Cut(name, ".")
	if !wildcardDNSLabel.MatchString(first) {
		return fmt.Sprintf("domain name %q is invalid: label %q is not a DNS-1123 label or a wildcard", name, first)
	}
	if more {
		return dnsLabelsError(rest)
	}
	return ""
}

func checkFQDN(errs *Errors, field, name string) {
	if e := fqdnError(name); e != "" {
		errs.Add(field, "%s", e)
	}
}

func checkWildcardHost(errs *Errors, field, name string) {
	if e := wildcardDomainError(name); e != "" {
		errs.Add(field, "%s", e)
	}
}

// checkNamespacedHost checks a "namespace/host" entry of a Gateway server
// (inGateway: a plain host is also accepted, namespace may be "*" or ".")
// or of a Sidecar egress listener (namespace may also be "~").
func checkNamespacedHost(errs *Errors, field, h string, inGateway bool) {
	ns, name, ok := strings.Cut(h, "/")
	if !ok {
		if inGateway {
			checkWildcardHost(errs, field, h)
			return
		}
		errs.Add(field, "host %q must be of the form namespace/host (namespace may be *, . or ~)", h)
		return
	}
	if ns == "" || name == "" {
		errs.Add(field, "host %q: namespace and host must not be empty", h)
		return
	}
	special := ns == "*" || ns == "." || (!inGateway && ns == "~")
	if !special && !isDNSLabel(ns) {
		errs.Add(field, "host %q: invalid namespace %q", h, ns)
	}
	checkWildcardHost(errs, field, name)
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil && !strings.Contains(s, "%")
}

// checkIPOrCIDR accepts "10.0.0.1", "10.0.0.0/8", "2001:db8::/32".
func checkIPOrCIDR(errs *Errors, field, s string) {
	if strings.Contains(s, "/") {
		if _, err := netip.ParsePrefix(s); err != nil {
			errs.Add(field, "%q is not a valid CIDR block", s)
		}
		return
	}
	if !isIP(s) {
		errs.Add(field, "%q is not a valid IP address or CIDR block", s)
	}
}

func checkIP(errs *Errors, field, s string) {
	if !isIP(s) {
		errs.Add(field, "%q is not a valid IP address", s)
	}
}

// unixAddressError checks the path part of a unix:// address: an absolute
// file path, or an abstract socket name starting with '@'.
func unixAddressError(p string) string {
	switch {
	case p == "":
		return "unix socket address must not be empty"
	case strings.HasPrefix(p, "@"):
		return ""
	case !path.IsAbs(p) || strings.HasSuffix(p, "/"):
		return fmt.Sprintf("%q is not an absolute path to a file", p)
	}
	return ""
}

func checkPort(errs *Errors, field string, n uint32) {
	if n < 1 || n > 65535 {
		errs.Add(field, "port number %d is not in the range 1..65535", n)
	}
}

// checkPortName: Istio requires a DNS-1123 label.
func checkPortName(errs *Errors, field, name string) {
	if name == "" {
		errs.Add(field, "port name is required")
	} else if !isDNSLabel(name) {
		errs.Add(field, "port name %q is not a DNS-1123 label (letters, digits and '-')", name)
	}
}

// protocols are the names istio pkg/config/protocol.Parse accepts,
// compared case-insensitively.
var protocols = map[string]bool{
	"http": true, "https": true, "http2": true, "grpc": true, "grpc-web": true,
	"tcp": true, "tls": true, "mongo": true, "redis": true, "mysql": true,
	"udp": true, "http_proxy": true,
}

func isProtocol(p string) bool { return protocols[strings.ToLower(p)] }

// checkProtocol accepts "" (the proxy sniffs the protocol).
func checkProtocol(errs *Errors, field, p string) {
	if p != "" && !isProtocol(p) {
		errs.Add(field, "unknown protocol %q; known: HTTP, HTTPS, HTTP2, GRPC, GRPC-WEB, TCP, TLS, MONGO, REDIS, MYSQL, UDP", p)
	}
}

func protocolIsTLS(p string) bool {
	p = strings.ToLower(p)
	return p == "https" || p == "tls"
}

func protocolIsHTTP(p string) bool {
	switch strings.ToLower(p) {
	case "http", "http2", "grpc", "grpc-web", "http_proxy":
		return true
	}
	return false
}

// checkDuration: a valid protobuf duration of at least 1ms, to the
// millisecond (Istio's agent.ValidateDuration).
func checkDuration(errs *Errors, field string, d *durationpb.Duration) {
	if d == nil {
		return
	}
	if err := d.CheckValid(); err != nil {
		errs.Add(field, "invalid duration: %v", err)
		return
	}
	dur := d.AsDuration()
	if dur < time.Millisecond {
		errs.Add(field, "duration %s is shorter than 1ms", dur)
	} else if dur%time.Millisecond != 0 {
		errs.Add(field, "duration %s is finer than a millisecond; only millisecond precision is supported", dur)
	}
}

// checkNonNegativeDuration allows 0 (commonly "disabled").
func checkNonNegativeDuration(errs *Errors, field string, d *durationpb.Duration) {
	if d == nil {
		return
	}
	if err := d.CheckValid(); err != nil {
		errs.Add(field, "invalid duration: %v", err)
	} else if d.AsDuration() < 0 {
		errs.Add(field, "duration must not be negative")
	}
}

func checkPercent(errs *Errors, field string, v int32) {
	if v < 0 || v > 100 {
		errs.Add(field, "percentage %d is not in the range 0..100", v)
	}
}

// checkPercentage checks a fractional Percent: 0, or 0.0001..100.
func checkPercentage(errs *Errors, field string, p *networking.Percent) {
	if p == nil {
		return
	}
	if v := p.GetValue(); v < 0 || v > 100 || (v > 0 && v < 0.0001) {
		errs.Add(field, "percentage %v is neither 0 nor in the range 0.0001..100", v)
	}
}

// validateLabel checks a Kubernetes label: the key is an optional DNS-1123
// subdomain prefix and '/', then a name of at most 63 letters, digits,
// '-', '_' and '.' that starts and ends alphanumeric; the value is empty or
// such a name. It returns "" when both are valid, else the reason.
func validateLabel(k, v string) string {
	if e := labelKeyError(k); e != "" {
		return e
	}
	if v != "" && (len(v) > 63 || !labelNameRE.MatchString(v)) {
		return fmt.Sprintf("label value %q is invalid: at most 63 characters, letters, digits, '-', '_' and '.', starting and ending with a letter or digit", v)
	}
	return ""
}

func labelKeyError(k string) string {
	name := k
	if prefix, rest, ok := strings.Cut(k, "/"); ok {
		if prefix == "" || len(prefix) > 253 || !dns1123Subdomain.MatchString(prefix) {
			return fmt.Sprintf("label key %q is invalid: the prefix %q must be a DNS-1123 subdomain", k, prefix)
		}
		name = rest
	}
	if name == "" {
		return fmt.Sprintf("label key %q is invalid: the name part must not be empty", k)
	}
	if len(name) > 63 || !labelNameRE.MatchString(name) {
		return fmt.Sprintf("label key %q is invalid: the name part is at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit", k)
	}
	return ""
}

func checkLabels(errs *Errors, field string, labels map[string]string) {
	for k, v := range labels {
		if e := validateLabel(k, v); e != "" {
			errs.Add(mapKey(field, k), "%s", e)
		}
	}
}

// checkSelectorLabels checks the labels of a workload selector: valid
// labels, no wildcard (Istio's ValidateAlphaWorkloadSelector).
func checkSelectorLabels(errs *Errors, field string, labels map[string]string) {
	for k, v := range labels {
		f := mapKey(field, k)
		switch {
		case k == "":
			errs.Add(f, "a selector label key must not be empty")
		case strings.Contains(k, "*") || strings.Contains(v, "*"):
			errs.Add(f, "wildcards are not supported in selectors")
		default:
			if e := validateLabel(k, v); e != "" {
				errs.Add(f, "%s", e)
			}
		}
	}
}

func checkWorkloadSelector(errs *Errors, field string, s *networking.WorkloadSelector) {
	if s != nil {
		checkSelectorLabels(errs, field+".labels", s.GetLabels())
	}
}

func checkMatchLabels(errs *Errors, field string, s *typev1beta1.WorkloadSelector) {
	if s != nil {
		checkSelectorLabels(errs, field+".matchLabels", s.GetMatchLabels())
	}
}

// checkExportTo: each entry is "*", ".", "~" (service entries only) or a
// namespace; no duplicates ("." counts as the config's namespace); "*"
// and "~" exclude every other entry.
func checkExportTo(errs *Errors, field, namespace string, exportTo []string, allowNone bool) {
	seen := make(map[string]bool, len(exportTo))
	for i, e := range exportTo {
		f := idx(field, i)
		switch {
		case e == "*" || e == ".":
		case e == "~":
			if !allowNone {
				errs.Add(f, "\"~\" (visible to no one) is allowed only in a ServiceEntry")
			}
		case !isNamespace(e):
			errs.Add(f, "%q is neither *, . nor a namespace name", e)
		}
		key := e
		if e == "." {
			key = namespace
		}
		if seen[key] {
			errs.Add(f, "duplicate entry %q", e)
		}
		seen[key] = true
	}
	if len(seen) > 1 && (seen["*"] || seen["~"]) {
		errs.Add(field, "\"*\" and \"~\" cannot be combined with other entries")
	}
}

// checkEnum rejects numeric enum values that name no constant; protojson
// accepts any number for an open enum.
func checkEnum(errs *Errors, field string, e protoreflect.Enum) {
	if e.Descriptor().Values().ByNumber(e.Number()) == nil {
		errs.Add(field, "unknown value %d", e.Number())
	}
}

// checkStringMatch checks that m sets one of exact, prefix or regex
// (emptyMatchOK: or none, a presence test) and that a regex compiles.
func checkStringMatch(errs *Errors, field string, m *networking.StringMatch, emptyPrefixOK, emptyMatchOK bool) {
	if m == nil {
		return
	}
	switch t := m.GetMatchType().(type) {
	case *networking.StringMatch_Exact:
	case *networking.StringMatch_Prefix:
		if t.Prefix == "" && !emptyPrefixOK {
			errs.Add(field+".prefix", "prefix must not be empty")
		}
	case *networking.StringMatch_Regex:
		checkRegex(errs, field+".regex", t.Regex)
	default:
		if !emptyMatchOK {
			errs.Add(field, "exactly one of exact, prefix or regex is required")
		}
	}
}

// checkRegex compiles re with Go's RE2 engine, the syntax Envoy uses.
func checkRegex(errs *Errors, field, re string) {
	if re == "" {
		errs.Add(field, "regex must not be empty")
		return
	}
	if _, err := regexp.Compile(re); err != nil {
		errs.Add(field, "%q is not a valid RE2 regular expression: %v", re, err)
	}
}

func checkHeaderName(errs *Errors, field, name string) {
	if name == "" {
		errs.Add(field, "header name must not be empty")
	} else if !httpTokenRE.MatchString(name) {
		errs.Add(field, "header name %q has characters not allowed in an HTTP header name", name)
	}
}
