package e2e

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/sources/mcp"
)

// TestBaremeshServesMCP: sources/mcp subscribed to a baremeshd (SotW and
// Delta) holds what baremesh's files hold.
func TestBaremeshServesMCP(t *testing.T) {
	bs := map[string]*backend{"a1": startBackend(t, "a1")}
	m := startMeshWith(t, map[string]string{"echo.yaml": echoService(bs, map[string]string{"a1": "v1"}), "vs.yaml": routes(100, 0, "")}, plaintextMCP)
	for _, delta := range []bool{false, true} {
		agg := store.NewAggregate()
		u := mcp.New(mcp.UpstreamConfig{Name: "baremesh", Address: m.d.XDSAddr(), Delta: delta},
			mcp.Options{Logger: slog.New(slog.DiscardHandler)}, agg.AddSource("mcp:baremesh"))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = u.Run(ctx) }()
		testkit.EventuallyWithin(t, 20*time.Second, "baremesh's configs over MCP", func() bool {
			_, vs := agg.Get(config.VirtualService, "default", "echo")
			_, we := agg.Get(config.WorkloadEntry, "default", "a1")
			return vs && we
		})
		t.Logf("delta %v: %+v", delta, u.Status())
		cancel()
		<-done
	}
}
