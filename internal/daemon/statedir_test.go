package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/core/identity"
)

// TestLooseStateDirRefused (issue #24): a pre-existing state directory
// another local user could write (or, for ca/ and tokens/, read) is
// refused at start and by check-config, naming the path and the fix; a
// local user who could write tokens/ could mint a join token and get a
// certificate for any namespace. Once tightened, the daemon starts.
func TestLooseStateDirRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		path string // relative to the state dir; "" is the dir itself
		file bool
		mode os.FileMode
	}{
		{"state dir 0777", "", false, 0o777},
		{"tokens 0755", "tokens", false, 0o755},
		{"tokens 0777", "tokens", false, 0o777},
		{"ca 0750", "ca", false, 0o750},
		{"workloads 0777", "workloads", false, 0o777},
		{"token file 0666", "tokens/tokens.json", true, 0o666},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := identityConfig(t)
			// A token as baremeshctl makes it: tokens/ exists with its file.
			if _, _, err := (&identity.TokenStore{Dir: filepath.Join(cfg.StateDir, "tokens")}).Create(identity.TokenSpec{Namespace: "default", ServiceAccount: "vm", TTL: 3600e9}); err != nil {
				t.Fatal(err)
			}
			// ... and ca/ with the CA the tokens were made under.
			if _, err := identity.LoadCA(identity.CAOptions{Dir: filepath.Join(cfg.StateDir, "ca")}); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(cfg.StateDir, "workloads"), 0o700); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(cfg.StateDir, c.path)
			if err := os.Chmod(p, c.mode); err != nil {
				t.Fatal(err)
			}
			_, err := New(cfg, slog.New(slog.DiscardHandler))
			if err == nil || !strings.Contains(err.Error(), p+" has mode") || !strings.Contains(err.Error(), "chmod") {
				t.Fatalf("New with %s: %v, want a refusal naming %s", c.name, err, p)
			}
			if err := checkCA(cfg); err == nil || !strings.Contains(err.Error(), p) {
				t.Fatalf("check-config with %s: %v, want a refusal naming %s", c.name, err, p)
			}
			tight := os.FileMode(0o700)
			if c.file {
				tight = 0o600
			}
			if err := os.Chmod(p, tight); err != nil {
				t.Fatal(err)
			}
			d, err := New(cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatalf("New after chmod %04o: %v", tight, err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // Run with an ended context closes what New opened
			if err := d.Run(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
	if os.Geteuid() == 0 { // another user's directory (root can chown)
		cfg := identityConfig(t)
		tokens := filepath.Join(cfg.StateDir, "tokens")
		if err := os.Mkdir(tokens, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(tokens, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if _, err := New(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), tokens+" is owned by uid 12345") {
			t.Fatalf("New with another user's tokens/: %v", err)
		}
		// The package's layout checked by root (postinst runs
		// check-config as root): the service user owns the directory
		// and what is in it. Root accepts it (TestInstallUnderSystemd's
		// upgrade was refused: "owned by uid 999, not ... root").
		if err := os.Chown(cfg.StateDir, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if err := identity.CheckStateDir(cfg.StateDir); err != nil {
			t.Fatalf("root checking the service user's state directory: %v", err)
		}
	}
}
