package identity

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateFormat: a state directory is marked with this release's
// format; one of a later format (a downgrade) is refused by
// CheckStateDir, which the daemon and check-config run, naming the
// directory and both formats, and nothing is rewritten; one without the
// file (the releases before) is fine and gets it.
func TestStateFormat(t *testing.T) {
	dir := t.TempDir()
	if err := CheckStateDir(dir); err != nil {
		t.Fatalf("a directory of the releases before: %v", err)
	}
	if err := MarkStateFormat(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, StateFormatFile)
	if got := mustRead(t, path); !strings.Contains(got, `"format":1`) {
		t.Fatalf("%s: %s", StateFormatFile, got)
	}
	later := []byte(`{"format": 2}`)
	if err := os.WriteFile(path, later, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{"CheckStateDir": CheckStateDir(dir), "MarkStateFormat": MarkStateFormat(dir)} {
		if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "format 2") || !strings.Contains(err.Error(), "later baremesh") {
			t.Errorf("%s of a format-2 directory: %v, want a refusal naming it and its format", name, err)
		}
	}
	if got := mustRead(t, path); got != string(later) {
		t.Errorf("the format-2 file was rewritten: %s", got)
	}
}
