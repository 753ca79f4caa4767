package daemon

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// TestGathererServesWhatIsRegistered: /metrics gathers the registered
// collectors in turn on one goroutine (registry.Gatherer); what it
// serves is what the registry itself gathers, collectors unregistered
// leave it, and the registry still refuses a duplicate.
func TestGathererServesWhatIsRegistered(t *testing.T) {
	r := newRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_total", Help: "a counter"})
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "test_gauge", Help: "a gauge"}, []string{"kind"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "test_seconds", Help: "a histogram", Buckets: []float64{0.1, 1}})
	r.MustRegister(c, g, h)
	c.Add(3)
	g.WithLabelValues("a").Set(1)
	g.WithLabelValues("b").Set(2)
	h.Observe(0.5)
	same := func() {
		t.Helper()
		want, err := r.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Gatherer().Gather()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("served %d families, registered %d:\n%v\n%v", len(got), len(want), names(got), names(want))
		}
		for i := range want {
			if !proto.Equal(got[i], want[i]) {
				t.Fatalf("family %s served as\n%v\nregistered as\n%v", want[i].GetName(), got[i], want[i])
			}
		}
	}
	same()
	if !r.Unregister(g) {
		t.Fatal("gauge not unregistered")
	}
	same()
	if got, _ := r.Gatherer().Gather(); len(got) != 2 {
		t.Fatalf("after unregistering the gauge: %v", names(got))
	}
	if err := r.Register(prometheus.NewCounter(prometheus.CounterOpts{Name: "test_total", Help: "a counter"})); err == nil {
		t.Fatal("a duplicate collector was registered")
	}
	same()
}

func names(fs []*dto.MetricFamily) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.GetName())
	}
	return out
}
