// Package testkit holds the test habits every package that starts
// goroutines shares: one poll-with-deadline helper (Eventually) instead of
// sleeps, one goroutine-leak check for TestMain (Main, leak.go), and
// AsNobody for tests that must not run as root (nobody.go). It
// has no domain types and imports nothing of ours, so any tree may use it
// in tests (internal/arch allows it even to the node agent).
package testkit

import (
	"testing"
	"time"
)

// Deadline is how long Eventually waits: long enough for a loaded CI
// machine, short enough to fail a test that would hang.
const Deadline = 10 * time.Second

// Eventually polls cond every few milliseconds until it holds, and fails
// t (naming what it waited for) if it does not within Deadline.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyWithin(t, Deadline, what, cond)
}

// EventuallyWithin is Eventually with its own deadline.
func EventuallyWithin(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for wait := time.Millisecond; !cond(); wait = min(2*wait, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(wait)
	}
}
