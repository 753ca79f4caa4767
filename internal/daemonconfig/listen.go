package daemonconfig

import (
	"fmt"
	"net"
)

// CheckPlaintextXDS refuses a plaintext xDS address that is not loopback
// unless allowRemotePlaintextXDS says so: plaintext xDS authenticates
// nobody.
func CheckPlaintextXDS(cfg Config) error {
	if cfg.AllowRemotePlaintextXDS || isLoopback(cfg.XDSAddr) {
		return nil
	}
	return fmt.Errorf("xdsAddr: %q is not a loopback address; plaintext xDS authenticates nobody (serve remote proxies on tlsAddr, or set allowRemotePlaintextXDS: true on a trusted network)", cfg.XDSAddr)
}

// CheckDebugHTTP refuses a debug/metrics address that is not loopback
// unless allowRemoteHTTP says so: its pages show every resource in
// force, every proxy's config and the issued certificates, to anyone.
func CheckDebugHTTP(cfg Config) error {
	if cfg.AllowRemoteHTTP || isLoopback(cfg.HTTPAddr) {
		return nil
	}
	return fmt.Errorf("httpAddr: %q is not a loopback address; the /debug pages authenticate nobody and show the whole config (scrape /metrics through a local agent, or set allowRemoteHTTP: true on a trusted network)", cfg.HTTPAddr)
}

// isLoopback says whether a HOST:PORT listens on loopback only; an
// unparsable address is left to Validate, which names it.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
