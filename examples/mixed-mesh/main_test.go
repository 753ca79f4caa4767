package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/baremesh/baremesh/sources/kube/kubetest"
)

// TestExample runs the example as `go run` does: the pod behind the
// EndpointSlice and the VM selected by the Service both answer, through
// a cluster read with only the example's ClusterRole. The VM's backend
// refuses connections for its first 2 s, a backend that connects later than the other (a
// loaded host): the example counted from the first answer, while the
// client's round robin spread only over the backends already connected,
// and got "pod 20, VM 0" (2 of 21 runs; every run with the delay).
func TestExample(t *testing.T) {
	if kubetest.Assets() == "" {
		t.Skip("skipping: no kube-apiserver/etcd; run ../shared/tools/kube-assets or set KUBEBUILDER_ASSETS")
	}
	ctx := context.Background()
	ex, err := start(ctx, options{dir: ".", xdsAddr: "127.0.0.1:0", httpAddr: "127.0.0.1:0", log: slog.New(slog.DiscardHandler),
		vmServeDelay: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.close()
	seen, err := ex.call(ctx, 40)
	if err != nil {
		t.Fatal(err)
	}
	if seen["pod-1"] == 0 || seen["vm-1"] == 0 {
		t.Fatalf("answered by %v; want the pod and the VM", seen)
	}
	t.Logf("answered by %v", seen)
	for _, st := range ex.d.KubeStatus() {
		if st.Error != "" || !st.Synced {
			t.Fatalf("cluster %s: %+v (the read-only ClusterRole must be enough)", st.ID, st)
		}
	}
}
