package ads

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

type reasoned struct{ error }

func (reasoned) Reason() string { return "test_reason" }

// TestGuardRefusesOncePerConnection: a type Authorize refuses generates
// nothing for that proxy; the refusal is counted once per connection and
// type (not per push), again after the connection ended; cached types
// are left alone (their generators see the key's proxy, not the caller).
func TestGuardRefusesOncePerConnection(t *testing.T) {
	calls := 0
	g := func(gen.Input) ([]gen.Resource, error) { calls++; return []gen.Resource{{Name: "x"}}, nil }
	secret, shape := xdstype.Secret.With(g), xdstype.Cluster.With(g)
	reg := prometheus.NewRegistry()
	disconnected := 0
	opts := guard(Options{Types: []*xdstype.Type{secret, shape}, Registerer: reg, Logger: slog.New(slog.DiscardHandler),
		Hooks: Hooks{
			Authorize: func(p *model.Proxy, t *xdstype.Type) error {
				if p.Identity == nil {
					return reasoned{errors.New("no")}
				}
				return nil
			},
			OnDisconnect: func(*model.Proxy, error) { disconnected++ },
		}})
	if opts.Types[1] != shape {
		t.Fatal("a cached type was wrapped")
	}
	anon, known := &model.Proxy{ID: "anon"}, &model.Proxy{ID: "known", Identity: &model.Identity{Namespace: "ns"}}
	for range 3 {
		if res, _ := opts.Types[0].Generate(gen.Input{Proxy: anon}); len(res) != 0 {
			t.Fatalf("a refused proxy got %v", res)
		}
	}
	if res, _ := opts.Types[0].Generate(gen.Input{Proxy: known}); len(res) != 1 || calls != 1 {
		t.Fatalf("an allowed proxy got %v (%d generations)", res, calls)
	}
	refused := refusedCount(t, reg)
	if refused != 1 {
		t.Fatalf("3 refused pushes counted %v times, want once", refused)
	}
	opts.OnDisconnect(anon, nil)
	if disconnected != 1 {
		t.Fatal("the connection's own OnDisconnect was not called")
	}
	anon2 := &model.Proxy{ID: "anon"} // a new connection
	opts.Types[0].Generate(gen.Input{Proxy: anon2})
	if n := refusedCount(t, reg); n != 2 {
		t.Fatalf("a new connection's refusal counted: total %v, want 2", n)
	}
}

// refusedCount reads baremesh_xds_reads_refused_total{type=sds,reason=test_reason}.
func refusedCount(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "baremesh_xds_reads_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["type"] == "sds" && labels["reason"] == "test_reason" {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}
