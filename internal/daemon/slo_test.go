package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baremesh/baremesh/internal/daemonconfig"
)

// TestConvergenceSLOSetting: convergenceSLO defaults to 1s, reads a
// duration, and a negative one is refused naming the field and file.
func TestConvergenceSLOSetting(t *testing.T) {
	if d := daemonconfig.Defaults().ConvergenceSLO.Duration; d != time.Second {
		t.Fatalf("default convergenceSLO = %v, want 1s", d)
	}
	file := filepath.Join(t.TempDir(), "b.yaml")
	for body, want := range map[string]time.Duration{
		"configDirs: [c]\nconvergenceSLO: 250ms\n": 250 * time.Millisecond,
		"configDirs: [c]\nconvergenceSLO: 0s\n":    0,
	} {
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, _, err := daemonconfig.Load([]string{"--config", file})
		if err != nil || cfg.ConvergenceSLO.Duration != want {
			t.Errorf("%q: convergenceSLO = %v, err %v; want %v", body, cfg.ConvergenceSLO, err, want)
		}
	}
	if err := os.WriteFile(file, []byte("configDirs: [c]\nconvergenceSLO: -1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := daemonconfig.Load([]string{"--config", file})
	if err == nil || !strings.Contains(err.Error(), "convergenceSLO") || !strings.Contains(err.Error(), file) {
		t.Fatalf("negative convergenceSLO: err = %v", err)
	}
}
