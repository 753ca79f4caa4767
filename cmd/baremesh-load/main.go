// Command baremesh-load connects simulated Envoy sidecars to an ADS
// server and prints how long they took to be configured and what they
// received. See package internal/load.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/baremesh/baremesh/internal/load"
)

func main() {
	var (
		addr     = flag.String("addr", "127.0.0.1:15010", "ADS server HOST:PORT (plaintext gRPC)")
		proxies  = flag.Int("proxies", 100, "number of simulated sidecars")
		mode     = flag.String("mode", "sotw", "xDS variant: sotw or delta")
		perConn  = flag.Int("streams-per-conn", 100, "proxy streams sharing one gRPC connection")
		ns       = flag.String("namespace", "default", "namespace of the proxies")
		until    = flag.Bool("until-configured", true, "wait until every proxy is configured and print percentiles")
		duration = flag.Duration("duration", 0, "then stay connected this long and print totals again")
		timeout  = flag.Duration("timeout", 10*time.Minute, "give up waiting for all proxies to be configured after this")
	)
	flag.Parse()
	if !*until && *duration <= 0 {
		fmt.Fprintln(os.Stderr, "baremesh-load: give --until-configured or a --duration")
		os.Exit(2)
	}
	if err := run(*addr, *proxies, load.Mode(*mode), *perConn, *ns, *until, *duration, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "baremesh-load:", err)
		os.Exit(1)
	}
}

func run(addr string, proxies int, mode load.Mode, perConn int, ns string, until bool, duration, timeout time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := load.Probe(ctx, addr, mode); err != nil {
		return fmt.Errorf("probe %s (%s): %w", addr, mode, err)
	}
	f, err := load.Start(ctx, load.Options{Addr: addr, Proxies: proxies, Mode: mode, StreamsPerConn: perConn, Namespace: ns})
	if err != nil {
		return err
	}
	defer f.Stop()
	fmt.Printf("%d %s proxies on %d connections to %s\n", proxies, mode, f.Conns(), addr)
	if until {
		wctx, cancel := context.WithTimeout(ctx, timeout)
		lat, err := f.WaitConfigured(wctx)
		cancel()
		if err != nil {
			report(f, nil)
			return err
		}
		report(f, lat)
	}
	if duration > 0 {
		fmt.Printf("staying connected for %v\n", duration)
		select {
		case <-ctx.Done():
		case <-time.After(duration):
		}
		report(f, nil)
	}
	if err := f.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// report prints connect-to-configured percentiles (when lat is given)
// and what the proxies received, by type.
func report(f *load.Fleet, lat load.Latencies) {
	if lat != nil {
		fmt.Printf("start to configured:   %v\n", lat.Percentiles())
		var fromConnect load.Latencies
		for _, r := range f.Records() {
			fromConnect = append(fromConnect, r.Configured.Sub(r.Connected))
		}
		fmt.Printf("connect to configured: %v\n", fromConnect.Percentiles())
	}
	tot := f.Totals()
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "type\tresponses\tMB\tMB/proxy\t")
	for _, t := range load.Types {
		mb := float64(tot.Bytes[t]) / (1 << 20)
		fmt.Fprintf(w, "%s\t%d\t%.2f\t%.3f\t\n", t, tot.Responses[t], mb, mb/float64(f.Len()))
	}
	_ = w.Flush()
	fmt.Printf("NACKs %d, reconnects %d\n", tot.Nacks, tot.Reconnects)
}
