package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/core/identity"
	"github.com/baremesh/baremesh/internal/daemonconfig"
)

// checkConfigArgs are baremeshd check-config's flags for cfg.
func checkConfigArgs(cfg daemonconfig.Config, tls bool) []string {
	args := []string{"--config-dir", cfg.ConfigDirs[0], "--state-dir", cfg.StateDir, "--mesh-config", cfg.MeshConfig}
	if tls {
		args = append(args, "--tls-addr", "127.0.0.1:0")
	}
	return args
}

// startStop starts a daemon from cfg and stops it at once.
func startStop(t *testing.T, cfg daemonconfig.Config) {
	t.Helper()
	d, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCAMissingRefused (issue #32 item 3): a state directory that was used
// with a CA (it holds join tokens or registrations, or an emptied ca/) but
// has no CA now is refused at start and by check-config, naming what it
// found and what to do; no new root is made (which would silently make
// every certificate in the fleet untrusted). A first start still makes
// one.
func TestCAMissingRefused(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, cfg daemonconfig.Config)
		names string // a path the refusal names
	}{
		{"used tokens, no ca/", func(t *testing.T, cfg daemonconfig.Config) {
			store := &identity.TokenStore{Dir: filepath.Join(cfg.StateDir, "tokens")}
			tok, _, err := store.Create(identity.TokenSpec{Namespace: "default", ServiceAccount: "vm", TTL: 3600e9})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := store.Use(tok); err != nil { // a VM joined with it
				t.Fatal(err)
			}
		}, "tokens.json holds 1 join token(s) already used"},
		{"ca/ emptied after a start", func(t *testing.T, cfg daemonconfig.Config) {
			startStop(t, cfg)
			for _, f := range []string{identity.CACertFile, identity.CAKeyFile, identity.RootCertFile} {
				if err := os.Remove(filepath.Join(cfg.StateDir, "ca", f)); err != nil {
					t.Fatal(err)
				}
			}
		}, "exists but holds no ca-cert.pem"},
		{"registrations, no ca/", func(t *testing.T, cfg daemonconfig.Config) {
			dir := filepath.Join(cfg.StateDir, "workloads")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			state := `{"version":1,"entries":[{"namespace":"ns","name":"vm-10.0.0.1","group":"g","address":"10.0.0.1"}]}`
			if err := os.WriteFile(filepath.Join(dir, "entries.json"), []byte(state), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "entries.json holds 1 registration"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := identityConfig(t)
			c.setup(t, cfg)
			_, err := New(cfg, slog.New(slog.DiscardHandler))
			if err == nil || !strings.Contains(err.Error(), c.names) || !strings.Contains(err.Error(), "Restore ca-cert.pem") {
				t.Fatalf("New: %v, want a refusal naming %q and what to do", err, c.names)
			}
			if _, err := os.Stat(filepath.Join(cfg.StateDir, "ca", identity.CACertFile)); err == nil {
				t.Fatal("a new root was made")
			}
			if _, _, err := CheckConfig(checkConfigArgs(cfg, true)); err == nil || !strings.Contains(err.Error(), c.names) {
				t.Fatalf("check-config: %v, want a refusal naming %q", err, c.names)
			}
		})
	}
	// A first start makes its root, also with a token made before it
	// (baremeshctl needs no daemon) and never used.
	cfg := identityConfig(t)
	if _, _, err := (&identity.TokenStore{Dir: filepath.Join(cfg.StateDir, "tokens")}).Create(identity.TokenSpec{Namespace: "default", ServiceAccount: "vm", TTL: 3600e9}); err != nil {
		t.Fatal(err)
	}
	startStop(t, cfg)
}

// TestCorruptStateRefused (issue #32 item 3): a tokens.json or
// entries.json that does not parse is refused at start and by
// check-config (which the package's postinst relies on), naming the file
// and what to do; check-config said "config ok" for both.
func TestCorruptStateRefused(t *testing.T) {
	t.Run("tokens.json", func(t *testing.T) {
		cfg := identityConfig(t)
		startStop(t, cfg) // makes the CA
		tokens := filepath.Join(cfg.StateDir, "tokens")
		if _, _, err := (&identity.TokenStore{Dir: tokens}).Create(identity.TokenSpec{Namespace: "default", ServiceAccount: "vm", TTL: 3600e9}); err != nil {
			t.Fatal(err)
		}
		truncateFile(t, filepath.Join(tokens, identity.TokenFile))
		want := filepath.Join(tokens, identity.TokenFile)
		if _, err := New(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "restore it") {
			t.Fatalf("New: %v, want a refusal naming %s", err, want)
		}
		if _, _, err := CheckConfig(checkConfigArgs(cfg, true)); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("check-config: %v, want a refusal naming %s", err, want)
		}
	})
	t.Run("entries.json", func(t *testing.T) {
		cfg := identityConfig(t)
		cfg.TLSAddr = "" // state is checked with or without the TLS port
		state := filepath.Join(cfg.StateDir, "workloads", "entries.json")
		if err := os.MkdirAll(filepath.Dir(state), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(state, []byte(`{"version":1,"entries":[{"namespace":"ns","name":"vm-10.0.0.1","group":"g","address":"10.0.0.1"}]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := CheckConfig(checkConfigArgs(cfg, false)); err != nil {
			t.Fatalf("check-config with a good entries.json: %v", err)
		}
		truncateFile(t, state)
		if _, err := New(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), state) {
			t.Fatalf("New: %v, want a refusal naming %s", err, state)
		}
		if _, _, err := CheckConfig(checkConfigArgs(cfg, false)); err == nil || !strings.Contains(err.Error(), state) {
			t.Fatalf("check-config: %v, want a refusal naming %s", err, state)
		}
	})
}

// truncateFile cuts a file in half, as a crash or a full disk might.
func truncateFile(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
}
