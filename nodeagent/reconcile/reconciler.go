// Package reconcile is the node agent's local reconciler, after the Kyma
// Istio operator's model on one host: independent components (capture
// rules, the local proxy process, the control plane link, later the
// tunnel) each decide whether they need work, act, and report a status
// with a reason. One failing component does not stop the others; the
// node's status is Error if any errs, Warning if any warns, else Ready.
//
// It imports only nodeagent/iptables of this module.
package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// State is a component's or the node's condition.
type State string

// States, from best to worst.
const (
	StateReady   State = "Ready"
	StateWarning State = "Warning"
	StateError   State = "Error"
)

func (s State) rank() int {
	switch s {
	case StateReady:
		return 0
	case StateWarning:
		return 1
	default:
		return 2
	}
}

// Status is what a component reports after a pass.
type Status struct {
	State  State  `json:"state"`
	Reason string `json:"reason"`
}

// Ready, Warning and Error build statuses.
func Ready(format string, args ...any) Status {
	return Status{StateReady, fmt.Sprintf(format, args...)}
}

// Warning reports a degraded but working component.
func Warning(format string, args ...any) Status {
	return Status{StateWarning, fmt.Sprintf(format, args...)}
}

// Error reports a component that failed to reach its desired state.
func Error(format string, args ...any) Status {
	return Status{StateError, fmt.Sprintf(format, args...)}
}

// Component is one independent piece of host state. Reconcile is called
// from one goroutine at a time; it decides whether work is needed, does
// it, and reports. It should honour ctx and not block for long.
type Component interface {
	Name() string
	Reconcile(ctx context.Context) Status
}

// ComponentStatus is a component's last report.
type ComponentStatus struct {
	Name   string    `json:"name"`
	Status           // state and reason
	Since  time.Time `json:"since"` // when State last changed
}

// NodeStatus is the aggregate of all components after a pass. It is a
// value: callers may keep it; it is never mutated after being returned.
type NodeStatus struct {
	State      State             `json:"state"`
	Components []ComponentStatus `json:"components"`
	Passes     int               `json:"passes"`
	LastPass   time.Time         `json:"lastPass"`
}

// Aggregate is Error if any status errs, Warning if any warns, else Ready.
func Aggregate(statuses ...Status) State {
	worst := StateReady
	for _, s := range statuses {
		if s.State.rank() > worst.rank() {
			worst = s.State
		}
	}
	return worst
}

// Reconciler runs its components every interval. Status is safe for
// concurrent use.
type Reconciler struct {
	log        *slog.Logger
	components []Component
	interval   time.Duration
	onPass     func(NodeStatus)

	mu     sync.Mutex
	status NodeStatus
}

// Options configure New.
type Options struct {
	Interval time.Duration    // between passes; default 10s
	OnPass   func(NodeStatus) // called after every pass, from Run's goroutine
}

// New returns a reconciler over components, run in the order given.
func New(log *slog.Logger, opts Options, components ...Component) *Reconciler {
	if opts.Interval <= 0 {
		opts.Interval = 10 * time.Second
	}
	r := &Reconciler{log: log, components: components, interval: opts.Interval, onPass: opts.OnPass}
	for _, c := range components {
		r.status.Components = append(r.status.Components,
			ComponentStatus{Name: c.Name(), Status: Status{StateWarning, "not reconciled yet"}})
	}
	r.status.State = StateWarning
	return r
}

// Status returns the node status after the last pass.
func (r *Reconciler) Status() NodeStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.status
	s.Components = append([]ComponentStatus(nil), s.Components...)
	return s
}

// Pass reconciles every component once and returns the node status.
func (r *Reconciler) Pass(ctx context.Context) NodeStatus {
	now := time.Now()
	prev := r.Status()
	next := NodeStatus{Passes: prev.Passes + 1, LastPass: now}
	var statuses []Status
	for i, c := range r.components {
		st := r.reconcileOne(ctx, c)
		cs := ComponentStatus{Name: c.Name(), Status: st, Since: prev.Components[i].Since}
		if st.State != prev.Components[i].State || cs.Since.IsZero() {
			cs.Since = now
		}
		if st != prev.Components[i].Status {
			lvl := slog.LevelInfo
			if st.State != StateReady {
				lvl = slog.LevelWarn
			}
			r.log.Log(ctx, lvl, "component status", "component", c.Name(), "state", st.State, "reason", st.Reason)
		}
		next.Components = append(next.Components, cs)
		statuses = append(statuses, st)
	}
	next.State = Aggregate(statuses...)
	r.mu.Lock()
	r.status = next
	r.mu.Unlock()
	return next
}

// reconcileOne isolates components from each other: a panic becomes an
// Error status.
func (r *Reconciler) reconcileOne(ctx context.Context, c Component) (st Status) {
	defer func() {
		if p := recover(); p != nil {
			st = Error("panic: %v", p)
		}
	}()
	st = c.Reconcile(ctx)
	if st.State == "" {
		st.State = StateError
		st.Reason = "component reported no state: " + st.Reason
	}
	return st
}

// Run passes immediately and then every interval until ctx is done.
func (r *Reconciler) Run(ctx context.Context) error {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		s := r.Pass(ctx)
		if r.onPass != nil {
			r.onPass(s)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
