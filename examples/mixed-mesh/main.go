// Command mixed-mesh runs the mixed VM + Kubernetes example in one
// process: a real kube-apiserver and etcd (the binaries
// shared/tools/kube-assets builds, or KUBEBUILDER_ASSETS) holding a
// Service whose pod exists as an EndpointSlice, baremeshd reading that
// cluster through a kubeconfig whose user has only the read-only
// ClusterRole in clusterrole.yaml, a VM WorkloadEntry (conf.d/vm.yaml)
// that the Service selects, and a grpc-go xDS client that dials
// echo.mixed.svc.cluster.local and is answered by the pod and the VM.
//
//	go run ./examples/mixed-mesh            # prints who answered, exits
//	go run ./examples/mixed-mesh -keep      # keeps running; see /debug/configz
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
)

func main() { os.Exit(run()) }

// run is the program; it returns the exit code, so that its deferred
// clean-up (kube-apiserver, etcd, baremeshd, the backends, the work
// directory) runs before the process exits: os.Exit skips deferred calls.
func run() int {
	calls := flag.Int("calls", 20, "RPCs the xDS client makes")
	keep := flag.Bool("keep", false, "keep running after the calls (Ctrl-C stops)")
	xdsAddr := flag.String("xds-addr", "127.0.0.1:0", "baremeshd's xDS address")
	httpAddr := flag.String("http-addr", "127.0.0.1:0", "baremeshd's debug address (default: a free port, printed)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	_, self, _, _ := runtime.Caller(0)
	ex, err := start(ctx, options{dir: filepath.Dir(self), xdsAddr: *xdsAddr, httpAddr: *httpAddr, log: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mixed-mesh:", err)
		return 1
	}
	defer ex.close()
	fmt.Printf("baremeshd: xDS %s, debug http://%s/debug/configz\n", ex.d.XDSAddr(), ex.d.HTTPAddr())
	seen, err := ex.call(ctx, *calls)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mixed-mesh:", err)
		return 1
	}
	fmt.Printf("%d RPCs to xds:///echo.mixed.svc.cluster.local:7070 answered by: pod (EndpointSlice) %d, VM (WorkloadEntry) %d\n",
		*calls, seen["pod-1"], seen["vm-1"])
	if seen["pod-1"] == 0 || seen["vm-1"] == 0 {
		fmt.Fprintln(os.Stderr, "mixed-mesh: the pod and the VM should both have answered")
		return 1
	}
	if *keep {
		fmt.Println("Ctrl-C stops")
		<-ctx.Done()
	}
	return 0
}
