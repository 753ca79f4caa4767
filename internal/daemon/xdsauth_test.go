package daemon

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/internal/daemonconfig"
)

// TestPlaintextXDSLoopbackOnly: a non-loopback xdsAddr is refused (New and
// check-config name the setting) unless allowRemotePlaintextXDS is set.
func TestPlaintextXDSLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:0": true, "[::1]:0": true, "localhost:0": true, ":0": false, "0.0.0.0:0": false} {
		cfg := identityConfig(t)
		cfg.XDSAddr = addr
		err := daemonconfig.CheckPlaintextXDS(cfg)
		if (err == nil) != ok {
			t.Errorf("%s: %v", addr, err)
		}
		if !ok && !strings.Contains(err.Error(), "allowRemotePlaintextXDS") {
			t.Errorf("%s: error does not name the setting: %v", addr, err)
		}
	}
	cfg := identityConfig(t)
	cfg.XDSAddr = "0.0.0.0:0"
	if _, err := New(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Fatalf("New: %v", err)
	}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "xdsAddr") {
		t.Fatalf("Validate: %v", err)
	}
	cfg.AllowRemotePlaintextXDS = true // (not started: tests bind loopback only)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate with allowRemotePlaintextXDS: %v", err)
	}
}

// TestDebugHTTPLoopbackOnly (issue #24): the /debug pages show the whole
// config and every proxy's, so a non-loopback httpAddr is refused
// (naming the setting) unless allowRemoteHTTP is set.
func TestDebugHTTPLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:0": true, "[::1]:0": true, "localhost:0": true, ":15014": false, "0.0.0.0:15014": false, "10.0.0.1:15014": false} {
		cfg := identityConfig(t)
		cfg.HTTPAddr = addr
		err := cfg.Validate()
		if (err == nil) != ok {
			t.Errorf("%s: %v", addr, err)
		}
		if !ok && !strings.Contains(err.Error(), "allowRemoteHTTP") {
			t.Errorf("%s: error does not name the setting: %v", addr, err)
		}
		if !ok {
			if _, err := New(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "httpAddr") {
				t.Errorf("New with httpAddr %s: %v", addr, err)
			}
		}
		cfg.AllowRemoteHTTP = true
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s with allowRemoteHTTP: %v", addr, err)
		}
	}
}
