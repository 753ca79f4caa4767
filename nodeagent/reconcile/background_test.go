package reconcile

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/core/testkit"
)

func TestBackground(t *testing.T) {
	fail := make(chan error)
	runs := 0
	b := NewBackground("loop", func(ctx context.Context) error {
		runs++
		select {
		case err := <-fail:
			return err
		case <-ctx.Done():
			return nil
		}
	}, func() string { return "3 checked" })
	if s := b.Reconcile(context.Background()); s.State != StateReady || s.Reason != "running: 3 checked" {
		t.Errorf("first pass: %+v", s)
	}
	fail <- errors.New("caches did not sync")
	// The loop has returned once fail was received; wait for its record.
	testkit.Eventually(t, "the loop to record its failure", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return !b.running
	})
	if s := b.Reconcile(context.Background()); s.State != StateError || !strings.Contains(s.Reason, "caches did not sync") {
		t.Errorf("after failure: %+v", s)
	}
	if err := b.Close(); err != nil || runs != 2 {
		t.Errorf("Close: %v after %d runs; want 2", err, runs)
	}
	if s := b.Reconcile(context.Background()); s.State != StateWarning {
		t.Errorf("after Close: %+v", s)
	}
}
