package config

// DestinationRule validation, after istio/istio
// pkg/config/validation/validation.go and agent/validation.go.

import (
	"math"

	networking "istio.io/api/networking/v1alpha3"
)

func validateDestinationRule(c *Config) Errors {
	var errs Errors
	dr := c.Spec.(*networking.DestinationRule)
	if dr.GetHost() == "" {
		errs.Add("spec.host", "host is required")
	} else {
		checkWildcardHost(&errs, "spec.host", dr.GetHost())
	}
	checkTrafficPolicy(&errs, "spec.trafficPolicy", dr.GetTrafficPolicy())
	names := map[string]bool{}
	for i, s := range dr.GetSubsets() {
		f := idx("spec.subsets", i)
		if s == nil {
			errs.Add(f, "subset must not be null")
			continue
		}
		switch {
		case s.GetName() == "":
			errs.Add(f+".name", "subset name is required")
		case !isDNSLabel(s.GetName()):
			errs.Add(f+".name", "subset name %q is not a DNS-1123 label", s.GetName())
		case names[s.GetName()]:
			errs.Add(f+".name", "subset name %q is used by another subset", s.GetName())
		}
		names[s.GetName()] = true
		checkLabels(&errs, f+".labels", s.GetLabels())
		checkTrafficPolicy(&errs, f+".trafficPolicy", s.GetTrafficPolicy())
	}
	checkMatchLabels(&errs, "spec.workloadSelector", dr.GetWorkloadSelector())
	checkExportTo(&errs, "spec.exportTo", c.Namespace, dr.GetExportTo(), false)
	return errs
}

func checkTrafficPolicy(errs *Errors, f string, p *networking.TrafficPolicy) {
	if p == nil {
		return
	}
	if p.GetOutlierDetection() == nil && p.GetConnectionPool() == nil && p.GetLoadBalancer() == nil &&
		p.GetTls() == nil && len(p.GetPortLevelSettings()) == 0 && p.GetTunnel() == nil &&
		p.GetProxyProtocol() == nil && p.GetRetryBudget() == nil {
		errs.Add(f, "a traffic policy needs at least one field")
		return
	}
	if p.GetTunnel() != nil && p.GetProxyProtocol() != nil {
		errs.Add(f, "tunnel and proxyProtocol cannot be set together")
	}
	checkOutlierDetection(errs, f+".outlierDetection", p.GetOutlierDetection())
	checkConnectionPool(errs, f+".connectionPool", p.GetConnectionPool())
	checkLoadBalancer(errs, f+".loadBalancer", p.GetLoadBalancer())
	checkClientTLS(errs, f+".tls", p.GetTls())
	if t := p.GetTunnel(); t != nil {
		if t.GetProtocol() != "" && t.GetProtocol() != "CONNECT" && t.GetProtocol() != "POST" {
			errs.Add(f+".tunnel.protocol", "protocol must be CONNECT or POST")
		}
		if !isIP(t.GetTargetHost()) && fqdnError(t.GetTargetHost()) != "" {
			errs.Add(f+".tunnel.targetHost", "%q is neither a domain name nor an IP address", t.GetTargetHost())
		}
		checkPort(errs, f+".tunnel.targetPort", t.GetTargetPort())
	}
	if pp := p.GetProxyProtocol(); pp != nil {
		checkEnum(errs, f+".proxyProtocol.version", pp.GetVersion())
	}
	if rb := p.GetRetryBudget(); rb != nil {
		if v := rb.GetPercent(); v != nil && (v.GetValue() < 0 || v.GetValue() > 100) {
			errs.Add(f+".retryBudget.percent", "%v is not in the range 0..100", v.GetValue())
		}
		checkDuration(errs, f+".retryBudget.budgetInterval", rb.GetBudgetInterval())
	}
	for i, pl := range p.GetPortLevelSettings() {
		pf := idx(f+".portLevelSettings", i)
		if pl == nil {
			errs.Add(pf, "must not be null")
			continue
		}
		if pl.GetPort() == nil || pl.GetPort().GetNumber() == 0 {
			errs.Add(pf+".port", "port is required")
		} else {
			checkPort(errs, pf+".port.number", pl.GetPort().GetNumber())
		}
		if pl.GetOutlierDetection() == nil && pl.GetConnectionPool() == nil && pl.GetLoadBalancer() == nil && pl.GetTls() == nil {
			errs.Add(pf, "a port traffic policy needs at least one of loadBalancer, connectionPool, outlierDetection or tls")
		}
		checkOutlierDetection(errs, pf+".outlierDetection", pl.GetOutlierDetection())
		checkConnectionPool(errs, pf+".connectionPool", pl.GetConnectionPool())
		checkLoadBalancer(errs, pf+".loadBalancer", pl.GetLoadBalancer())
		checkClientTLS(errs, pf+".tls", pl.GetTls())
	}
}

func checkOutlierDetection(errs *Errors, f string, o *networking.OutlierDetection) {
	if o == nil {
		return
	}
	checkDuration(errs, f+".baseEjectionTime", o.GetBaseEjectionTime())
	checkDuration(errs, f+".interval", o.GetInterval())
	checkPercent(errs, f+".maxEjectionPercent", o.GetMaxEjectionPercent())
	checkPercent(errs, f+".minHealthPercent", o.GetMinHealthPercent())
	//lint:ignore SA1019 deprecated, still accepted
	if o.GetConsecutiveErrors() < 0 {
		errs.Add(f+".consecutiveErrors", "must not be negative")
	}
	if !o.GetSplitExternalLocalOriginErrors() && o.GetConsecutiveLocalOriginFailures().GetValue() > 0 {
		errs.Add(f+".consecutiveLocalOriginFailures", "needs splitExternalLocalOriginErrors: true")
	}
	for i, c := range o.GetOutlierDetectionHttpErrorCodes() {
		if c < 100 || c > 599 {
			errs.Add(idx(f+".outlierDetectionHttpErrorCodes", i), "%d is not an HTTP status code", c)
		}
	}
}

func checkConnectionPool(errs *Errors, f string, cp *networking.ConnectionPoolSettings) {
	if cp == nil {
		return
	}
	if cp.GetHttp() == nil && cp.GetTcp() == nil {
		errs.Add(f, "a connection pool needs tcp or http settings")
		return
	}
	if h := cp.GetHttp(); h != nil {
		hf := f + ".http"
		for name, v := range map[string]int32{
			"http1MaxPendingRequests": h.GetHttp1MaxPendingRequests(), "http2MaxRequests": h.GetHttp2MaxRequests(),
			"maxRequestsPerConnection": h.GetMaxRequestsPerConnection(), "maxRetries": h.GetMaxRetries(),
			"maxConcurrentStreams": h.GetMaxConcurrentStreams(),
		} {
			if v < 0 {
				errs.Add(hf+"."+name, "%d must not be negative", v)
			}
		}
		checkDuration(errs, hf+".idleTimeout", h.GetIdleTimeout())
		checkEnum(errs, hf+".h2UpgradePolicy", h.GetH2UpgradePolicy())
		if h.GetH2UpgradePolicy() == networking.ConnectionPoolSettings_HTTPSettings_UPGRADE && h.GetUseClientProtocol() {
			errs.Add(hf+".useClientProtocol", "must not be true when h2UpgradePolicy is UPGRADE")
		}
		if ka := h.GetHttp2KeepAlive(); ka != nil {
			checkDuration(errs, hf+".http2KeepAlive.interval", ka.GetInterval())
			checkDuration(errs, hf+".http2KeepAlive.timeout", ka.GetTimeout())
		}
	}
	if t := cp.GetTcp(); t != nil {
		tf := f + ".tcp"
		if t.GetMaxConnections() < 0 {
			errs.Add(tf+".maxConnections", "%d must not be negative", t.GetMaxConnections())
		}
		checkDuration(errs, tf+".connectTimeout", t.GetConnectTimeout())
		checkDuration(errs, tf+".maxConnectionDuration", t.GetMaxConnectionDuration())
		// 0s disables the idle timeout.
		if it := t.GetIdleTimeout(); it != nil && it.AsDuration() != 0 {
			checkDuration(errs, tf+".idleTimeout", it)
		}
		if ka := t.GetTcpKeepalive(); ka != nil {
			checkDuration(errs, tf+".tcpKeepalive.time", ka.GetTime())
			checkDuration(errs, tf+".tcpKeepalive.interval", ka.GetInterval())
		}
	}
}

func checkLoadBalancer(errs *Errors, f string, lb *networking.LoadBalancerSettings) {
	if lb == nil {
		return
	}
	// simple and consistentHash are a oneof: protojson rejects both.
	switch p := lb.GetLbPolicy().(type) {
	case *networking.LoadBalancerSettings_Simple:
		checkEnum(errs, f+".simple", p.Simple)
	case *networking.LoadBalancerSettings_ConsistentHash:
		ch := p.ConsistentHash
		cf := f + ".consistentHash"
		if ch == nil {
			errs.Add(cf, "must not be null")
			break
		}
		switch k := ch.GetHashKey().(type) {
		case *networking.LoadBalancerSettings_ConsistentHashLB_HttpCookie:
			if k.HttpCookie.GetName() == "" {
				errs.Add(cf+".httpCookie.name", "cookie name is required")
			}
			checkNonNegativeDuration(errs, cf+".httpCookie.ttl", k.HttpCookie.GetTtl())
		case *networking.LoadBalancerSettings_ConsistentHashLB_HttpHeaderName:
			checkHeaderName(errs, cf+".httpHeaderName", k.HttpHeaderName)
		case *networking.LoadBalancerSettings_ConsistentHashLB_HttpQueryParameterName:
			if k.HttpQueryParameterName == "" {
				errs.Add(cf+".httpQueryParameterName", "must not be empty")
			}
		case nil:
			errs.Add(cf, "one of httpHeaderName, httpCookie, useSourceIp or httpQueryParameterName is required")
		}
		//lint:ignore SA1019 deprecated field
		if ch.GetMinimumRingSize() != 0 && ch.GetHashAlgorithm() != nil {
			errs.Add(cf, "only one of minimumRingSize and ringHash/maglev may be set")
		}
		if ml := ch.GetMaglev(); ml != nil {
			switch ts := ml.GetTableSize(); {
			case ts == 0:
				errs.Add(cf+".maglev.tableSize", "tableSize is required")
			case ts >= 5000011:
				errs.Add(cf+".maglev.tableSize", "tableSize must be less than 5000011")
			case !isPrime(ts):
				errs.Add(cf+".maglev.tableSize", "tableSize %d is not a prime number", ts)
			}
		}
	}
	if l := lb.GetLocalityLbSetting(); l != nil {
		checkLocalityLB(errs, f+".localityLbSetting", l)
	}
	if w := lb.GetWarmup(); w != nil {
		if w.GetDuration() == nil {
			errs.Add(f+".warmup.duration", "duration is required")
		}
		checkDuration(errs, f+".warmup.duration", w.GetDuration())
		if w.GetMinimumPercent().GetValue() < 0 || w.GetMinimumPercent().GetValue() > 100 {
			errs.Add(f+".warmup.minimumPercent", "must be in the range 0..100")
		}
		if w.GetAggression() != nil && w.GetAggression().GetValue() < 1 {
			errs.Add(f+".warmup.aggression", "must be at least 1")
		}
	}
	checkDuration(errs, f+".warmupDurationSecs", lb.GetWarmupDurationSecs())
}

// checkLocalityLB: distribute and failover exclude each other; each
// distribute weight map sums to 100.
func checkLocalityLB(errs *Errors, f string, l *networking.LocalityLoadBalancerSetting) {
	if len(l.GetDistribute()) > 0 && (len(l.GetFailover()) > 0 || len(l.GetFailoverPriority()) > 0) {
		errs.Add(f, "only one of distribute and failover/failoverPriority may be set")
	}
	for i, d := range l.GetDistribute() {
		df := idx(f+".distribute", i)
		if d.GetFrom() == "" {
			errs.Add(df+".from", "must not be empty")
		}
		var sum uint64
		for _, w := range d.GetTo() {
			sum += uint64(w)
		}
		if sum != 100 {
			errs.Add(df+".to", "weights add up to %d, not 100", sum)
		}
	}
	for i, fo := range l.GetFailover() {
		ff := idx(f+".failover", i)
		if fo.GetFrom() == "" || fo.GetTo() == "" {
			errs.Add(ff, "from and to are required")
		} else if fo.GetFrom() == fo.GetTo() {
			errs.Add(ff, "from and to must differ")
		}
	}
}

// checkClientTLS follows Istio's agent.ValidateTLS.
func checkClientTLS(errs *Errors, f string, t *networking.ClientTLSSettings) {
	if t == nil {
		return
	}
	checkEnum(errs, f+".mode", t.GetMode())
	mode := t.GetMode()
	if t.GetInsecureSkipVerify().GetValue() && mode == networking.ClientTLSSettings_SIMPLE {
		if t.GetCaCertificates() != "" || len(t.GetSubjectAltNames()) > 0 || t.GetCaCrl() != "" {
			errs.Add(f+".insecureSkipVerify", "insecureSkipVerify excludes caCertificates, caCrl and subjectAltNames")
		}
	}
	if (mode == networking.ClientTLSSettings_SIMPLE || mode == networking.ClientTLSSettings_MUTUAL) && t.GetCredentialName() != "" {
		if t.GetClientCertificate() != "" || t.GetPrivateKey() != "" || t.GetCaCertificates() != "" || t.GetCaCrl() != "" {
			errs.Add(f+".credentialName", "credentialName excludes clientCertificate, privateKey, caCertificates and caCrl")
		}
		return
	}
	if mode == networking.ClientTLSSettings_MUTUAL {
		if t.GetClientCertificate() == "" {
			errs.Add(f+".clientCertificate", "MUTUAL TLS needs a client certificate (or credentialName)")
		}
		if t.GetPrivateKey() == "" {
			errs.Add(f+".privateKey", "MUTUAL TLS needs a private key (or credentialName)")
		}
	}
}

// isPrime matches Envoy's check of a Maglev table size.
func isPrime(x uint64) bool {
	if x != 0 && x < 4 {
		return true
	}
	if x&1 == 0 {
		return false
	}
	limit := uint64(math.Sqrt(float64(x)))
	for d := uint64(3); d <= limit; d += 2 {
		if x%d == 0 {
			return false
		}
	}
	return true
}
