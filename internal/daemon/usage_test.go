package daemon

import (
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/internal/daemonconfig"
)

// TestLoadHelp: --help is not an error to exit 2 on (baremeshd exits 0),
// and the usage names every command.
func TestLoadHelp(t *testing.T) {
	if _, _, err := daemonconfig.Load([]string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("Load(--help) = %v, want flag.ErrHelp", err)
	}
	for _, cmd := range []string{"check-config", "version", "help"} {
		if !strings.Contains(daemonconfig.Usage, "baremeshd "+cmd) {
			t.Errorf("usage does not name %q", cmd)
		}
	}
}
