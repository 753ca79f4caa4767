package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/baremesh/baremesh/nodeagent/agent"
)

// runTunnel is `baremesh-agent tunnel up|down|run -config FILE`: up
// applies once, down removes, run keeps the tunnel in place as a
// reconcile component until stopped (then removes it).
func runTunnel(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "up" && args[0] != "down" && args[0] != "run") {
		fmt.Fprintln(stderr, "usage: baremesh-agent tunnel up|down|run -config FILE")
		return 2
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("baremesh-agent tunnel "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "/etc/baremesh/tunnel.yaml", "tunnel configuration")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "baremesh-agent tunnel %s: %v\n", cmd, err)
		return 1
	}
	tf, err := agent.LoadTunnelFile(*path)
	if err != nil {
		return fail(err)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("component", "tunnel")
	tun, err := agent.StandaloneTunnel(ctx, log, tf)
	if err != nil {
		return fail(err)
	}
	switch cmd {
	case "up":
		changed, err := tun.Ensure(ctx)
		for _, c := range changed {
			fmt.Fprintln(stdout, c)
		}
		if err != nil {
			return fail(err)
		}
		return 0
	case "down":
		if err := tun.Remove(ctx); err != nil {
			return fail(err)
		}
		return 0
	}
	if err := agent.KeepTunnel(ctx, log, tun, tf.Interval); err != nil {
		return fail(err)
	}
	return 0
}
