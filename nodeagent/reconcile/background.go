package reconcile

import (
	"context"
	"sync"
)

// Background runs a long-lived loop (a Kubernetes controller, say) as a
// component: the first pass starts it, every pass reports whether it is
// still running, and a pass after it stopped with an error starts it
// again. Close stops it and waits for it.
type Background struct {
	name   string
	run    func(ctx context.Context) error
	report func() string

	mu      sync.Mutex
	ctx     context.Context
	cancel  context.CancelFunc
	running bool
	lastErr error
	wg      sync.WaitGroup
}

// NewBackground returns a component named name around run; report, when
// not nil, adds a line to the Ready status (counters, say).
func NewBackground(name string, run func(ctx context.Context) error, report func() string) *Background {
	ctx, cancel := context.WithCancel(context.Background())
	return &Background{name: name, run: run, report: report, ctx: ctx, cancel: cancel}
}

// Name implements Component.
func (b *Background) Name() string { return b.name }

// Reconcile implements Component.
func (b *Background) Reconcile(context.Context) Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx.Err() != nil {
		return Warning("stopped")
	}
	prev := b.lastErr
	if !b.running {
		b.running, b.lastErr = true, nil
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			err := b.run(b.ctx)
			b.mu.Lock()
			b.running, b.lastErr = false, err
			b.mu.Unlock()
		}()
		if prev != nil {
			return Error("restarted after: %v", prev)
		}
	}
	if b.report != nil {
		return Ready("running: %s", b.report())
	}
	return Ready("running")
}

// Close stops the loop and waits for it to return.
func (b *Background) Close() error {
	b.cancel()
	b.wg.Wait()
	return nil
}
