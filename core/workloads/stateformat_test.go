package workloads

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateFileOfALaterFormat: an entries.json of a later format (a
// downgrade) is refused, at start and by check-config, with an error that
// names the file, both formats and what to do, and the file is left as it
// was.
func TestStateFileOfALaterFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "entries.json")
	later := []byte(`{"version": 2, "entries": [], "records": [], "somethingNew": true}`)
	if err := os.WriteFile(path, later, 0o600); err != nil {
		t.Fatal(err)
	}
	err := CheckStateFile(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "format 2") || !strings.Contains(err.Error(), "later baremesh") {
		t.Fatalf("a format-2 state file: %v, want a refusal naming it, its format and a later release", err)
	}
	if b, _ := os.ReadFile(path); string(b) != string(later) {
		t.Errorf("the file was changed: %s", b)
	}
}
