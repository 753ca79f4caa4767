package reconcile

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
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
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.mu.Lock()
		running := b.running
		b.mu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the loop did not record its failure")
		}
		runtime.Gosched()
	}
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
