package workloads

import (
	"bytes"
	"os"
	"testing"
	"time"
)

// TestAbandonWritesNothing: a controller made over an older state file
// (entries only) has a save pending (the file rewritten with records);
// Abandon drops it, so a start refused after New leaves the file as it
// was (the daemon's refusal of a state directory without its CA left
// entries.json rewritten a moment after it had refused). Stop after
// Abandon writes nothing either. Without Abandon, Stop writes the file.
func TestAbandonWritesNothing(t *testing.T) {
	const v1 = `{"version":1,"entries":[{"namespace":"ns","name":"vm-10.0.0.1","group":"g","address":"10.0.0.1"}]}`
	for _, abandon := range []bool{true, false} {
		f := newFixture(t, time.Minute, false)
		f.c.Stop()
		if err := os.WriteFile(f.state, []byte(v1), 0o600); err != nil {
			t.Fatal(err)
		}
		c := f.newController(time.Minute, false)
		// The restore reaches the controller through the table's watch:
		// wait for its save to be pending.
		for deadline := time.Now().Add(10 * time.Second); ; {
			c.mu.Lock()
			pending := c.saveTimer != nil
			c.mu.Unlock()
			if pending {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no save pending after the restore")
			}
			time.Sleep(time.Millisecond)
		}
		if abandon {
			c.Abandon()
		}
		c.Stop()
		got, err := os.ReadFile(f.state)
		if err != nil {
			t.Fatal(err)
		}
		if unchanged := bytes.Equal(got, []byte(v1)); unchanged != abandon {
			t.Fatalf("abandon %v: file unchanged %v, want %v: %s", abandon, unchanged, abandon, got)
		}
	}
}
