package push_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/config/configtest"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/store"
)

// debounced is one push a debounce test saw: when (in the bubble's
// clock, from the first snapshot) and the ServiceEntries it carried.
type debounced struct {
	at    time.Duration
	names []string
}

func (d debounced) String() string { return fmt.Sprintf("%v %v", d.at, d.names) }

// runDebounce runs a pipeline with opts in a synctest bubble (its clock
// moves only when every goroutine in it waits, so the times are exact),
// makes the writes (a ServiceEntry name after a wait since the previous
// write, the first since the first snapshot) and returns the pushes
// seen until everything settled.
func runDebounce(t *testing.T, opts push.PipelineOptions, writes []struct {
	after time.Duration
	name  string
}) []debounced {
	var got []debounced
	synctest.Test(t, func(t *testing.T) {
		mem := store.NewMemory()
		p := push.NewPipeline(mem, model.NewRegistry(model.NewAllocator()), config.DefaultMeshConfig(), opts)
		mem.Subscribe(p.OnEvents)
		var t0 time.Time
		p.AddListener(func(_ *push.PushContext, r *push.Request) {
			if r.Reasons[push.ReasonInitial] == 1 {
				t0 = time.Now()
				return
			}
			var names []string
			for k := range r.Configs {
				names = append(names, k.Name)
			}
			slices.Sort(names)
			got = append(got, debounced{time.Since(t0), names})
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		synced := make(chan struct{})
		close(synced)
		go p.Run(ctx, synced)
		<-p.Ready()
		for _, w := range writes {
			time.Sleep(w.after) // the bubble's clock: the quiet period under test
			mem.Apply([]config.Config{configtest.Typed(t, replace(replace(seA, "name: a", "name: "+w.name), "ADDR", "10.0.0.1"))}, nil)
		}
		time.Sleep(opts.DebounceMax + opts.Debounce)
		synctest.Wait()
	})
	return got
}

// TestDebounceLeadingEdge (issue #30: push start after a write at most
// istiod's, 0.1 s at the default 100 ms debounce): with DebounceLeading a
// change after a quiet period is pushed at once and the changes that
// follow it within the debounce are merged as before; without it every
// change waits for a quiet period, as in istiod.
func TestDebounceLeadingEdge(t *testing.T) {
	const d = 100 * time.Millisecond
	type write = struct {
		after time.Duration
		name  string
	}
	for _, tc := range []struct {
		name    string
		leading bool
		writes  []write
		want    string
	}{
		{"a lone change is pushed at once", true,
			[]write{{d, "a"}},
			"[100ms [a]]"},
		{"without the leading edge it waits a quiet period", false,
			[]write{{d, "a"}},
			"[200ms [a]]"},
		{"a burst: its first change at once, the rest merged after a quiet period", true,
			[]write{{d, "a"}, {10 * time.Millisecond, "b"}, {30 * time.Millisecond, "c"}, {50 * time.Millisecond, "d"}},
			"[100ms [a] 290ms [b c d]]"},
		{"the same burst without it is one push", false,
			[]write{{d, "a"}, {10 * time.Millisecond, "b"}, {30 * time.Millisecond, "c"}, {50 * time.Millisecond, "d"}},
			"[290ms [a b c d]]"},
		{"a change soon after a push is debounced", true,
			[]write{{d, "a"}, {d + 50*time.Millisecond, "b"}, {d - time.Millisecond, "c"}},
			// b comes 150 ms after a's push: the leading edge; c 99 ms
			// after b's: debounced.
			"[100ms [a] 250ms [b] 449ms [c]]"},
		{"a change right after the first snapshot is debounced", true,
			[]write{{0, "a"}},
			"[100ms [a]]"},
		{"a continuous stream is pushed at DebounceMax", true,
			// every 30 ms from b (130 ms): DebounceMax (200 ms) after b.
			[]write{{d, "a"}, {30 * time.Millisecond, "b"}, {30 * time.Millisecond, "c"}, {30 * time.Millisecond, "d"},
				{30 * time.Millisecond, "e"}, {30 * time.Millisecond, "f"}, {30 * time.Millisecond, "g"}, {30 * time.Millisecond, "h"}},
			"[100ms [a] 330ms [b c d e f g h]]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := runDebounce(t, push.PipelineOptions{Debounce: d, DebounceMax: 200 * time.Millisecond, DebounceLeading: tc.leading}, tc.writes)
			if s := fmt.Sprint(got); s != tc.want {
				t.Errorf("pushes %s, want %s", s, tc.want)
			}
		})
	}
}
