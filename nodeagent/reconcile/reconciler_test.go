package reconcile

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m.Run) }

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

type fakeComponent struct {
	name   string
	status Status
	panics bool
	calls  atomic.Int32
}

func (f *fakeComponent) Name() string { return f.name }
func (f *fakeComponent) Reconcile(context.Context) Status {
	f.calls.Add(1)
	if f.panics {
		panic("boom")
	}
	return f.status
}

func TestAggregate(t *testing.T) {
	cases := []struct {
		in   []Status
		want State
	}{
		{nil, StateReady},
		{[]Status{Ready("a"), Ready("b")}, StateReady},
		{[]Status{Ready("a"), Warning("b")}, StateWarning},
		{[]Status{Warning("a"), Error("b"), Ready("c")}, StateError},
		{[]Status{Error("a"), Warning("b")}, StateError},
	}
	for _, tc := range cases {
		if got := Aggregate(tc.in...); got != tc.want {
			t.Errorf("Aggregate(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestFailingComponentDoesNotStopOthers: an erroring and a panicking
// component are reported, and the components after them still run.
func TestFailingComponentDoesNotStopOthers(t *testing.T) {
	bad := &fakeComponent{name: "bad", status: Error("cannot apply")}
	boom := &fakeComponent{name: "boom", panics: true}
	warn := &fakeComponent{name: "warn", status: Warning("skew")}
	good := &fakeComponent{name: "good", status: Ready("fine")}
	r := New(discard(), Options{}, bad, boom, warn, good)
	if s := r.Status(); s.State != StateWarning || s.Components[0].Reason != "not reconciled yet" {
		t.Errorf("status before any pass = %+v", s)
	}
	s := r.Pass(context.Background())
	if s.State != StateError {
		t.Errorf("node state = %s, want Error", s.State)
	}
	for _, c := range []*fakeComponent{bad, boom, warn, good} {
		if c.calls.Load() != 1 {
			t.Errorf("%s reconciled %d times, want 1", c.name, c.calls.Load())
		}
	}
	if got := s.Components[1]; got.State != StateError || !strings.Contains(got.Reason, "panic: boom") {
		t.Errorf("panicking component status = %+v", got)
	}
	if got := s.Components[3]; got.State != StateReady || got.Reason != "fine" {
		t.Errorf("good component status = %+v", got)
	}

	bad.status, boom.panics = Ready("fixed"), false
	boom.status = Ready("ok")
	if s := r.Pass(context.Background()); s.State != StateWarning {
		t.Errorf("node state = %s, want Warning", s.State)
	}
	warn.status = Ready("ok")
	s2 := r.Pass(context.Background())
	if s2.State != StateReady || s2.Passes != 3 {
		t.Errorf("node = %s after %d passes, want Ready after 3", s2.State, s2.Passes)
	}
	if !s2.Components[3].Since.Equal(s.Components[3].Since) {
		t.Error("Since moved for a component whose state did not change")
	}
}

func TestRunPassesUntilCancelled(t *testing.T) {
	c := &fakeComponent{name: "c", status: Ready("ok")}
	ctx, cancel := context.WithCancel(context.Background())
	passes := make(chan NodeStatus, 100)
	r := New(discard(), Options{Interval: 5 * time.Millisecond, OnPass: func(s NodeStatus) { passes <- s }}, c)
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	deadline := time.After(5 * time.Second)
	for n := 0; n < 3; {
		select {
		case <-passes:
			n++
		case <-deadline:
			t.Fatal("fewer than 3 passes in 5s")
		}
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestCheckSkew(t *testing.T) {
	cases := []struct {
		agent, other string
		ok           bool
	}{
		{"0.1.0-dev", "0.1.7", true},
		{"0.2.0", "0.1.0", true},
		{"0.2.0", "0.3.9", true},
		{"0.2.0", "0.4.0", false},
		{"0.4.0", "0.2.0", false},
		{"1.2.0", "2.2.0", false},
		{"1.31.0", "envoy  version: 6b7f6a5/1.30.2/Clean/RELEASE/BoringSSL", true},
		{"1.31.0", "fake-proxy version v1.33", false},
	}
	for _, tc := range cases {
		err := CheckSkew(tc.agent, tc.other)
		if (err == nil) != tc.ok {
			t.Errorf("CheckSkew(%q, %q) = %v, want ok=%v", tc.agent, tc.other, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrVersionSkew) {
			t.Errorf("CheckSkew(%q, %q) = %v, not ErrVersionSkew", tc.agent, tc.other, err)
		}
	}
	if err := CheckSkew("0.1.0", "no digits"); err == nil || errors.Is(err, ErrVersionSkew) {
		t.Errorf("unparseable version: %v", err)
	}
}
