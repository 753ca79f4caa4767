package workloads

import (
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/testkit"
)

// TestStateWriteBlocksNoConnect (issue #32, the 5,000-proxy start): while
// the state file is being written (a slow disk; with 5,000 registrations
// one write took 2 s on a loaded machine), a proxy still connects and
// registers. Before, the write ran under the controller's lock, so every
// connect, disconnect and table event waited for it: in the chaos run's
// start a replica spent a quarter of its CPU in saves, holding the lock.
// The write here is held until the test lets it go (writeState).
func TestStateWriteBlocksNoConnect(t *testing.T) {
	inWrite, release := make(chan struct{}, 1), make(chan struct{})
	real := writeState
	writeState = func(path string, data []byte) error {
		select {
		case inWrite <- struct{}{}:
		default:
		}
		<-release
		return real(path, data)
	}
	t.Cleanup(func() { writeState = real })
	f := newFixture(t, time.Minute, false)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	f.files.Update([]config.Config{group("ns", "reviews", "rev", false)}, nil)
	if err := f.c.Connect(proxy("ns", "reviews", "10.0.0.1", "rev")); err != nil {
		t.Fatal(err)
	}
	<-inWrite // a write of the state is in progress, and held

	done := make(chan error, 1)
	go func() { done <- f.c.Connect(proxy("ns", "reviews", "10.0.0.2", "rev")) }()
	testkit.Eventually(t, "a connect during the state write to return", func() bool {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return true
		default:
			return false
		}
	})
	f.waitEntry("ns", EntryName("reviews", "10.0.0.2", ""))
	close(release)
}
