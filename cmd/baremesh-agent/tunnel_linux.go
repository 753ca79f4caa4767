package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/baremesh/baremesh/nodeagent/iptables"
	"github.com/baremesh/baremesh/nodeagent/reconcile"
	"github.com/baremesh/baremesh/nodeagent/tunnel"
)

// tunnelFile is the tunnel's configuration file: the tunnel settings and
// the two namespaces ("" is the agent's own).
type tunnelFile struct {
	tunnel.Config `yaml:",inline"`
	NodeNetNS     string        `yaml:"nodeNetns"`
	ProxyNetNS    string        `yaml:"proxyNetns"`
	Backend       string        `yaml:"backend"` // nft, legacy or empty to detect
	Interval      time.Duration `yaml:"interval"`
}

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
	tf, err := loadTunnelFile(*path)
	if err != nil {
		return fail(err)
	}
	if err := iptables.CheckRoot(); err != nil {
		return fail(err)
	}
	backend, err := iptables.DetectBackend(ctx, iptables.Backend(tf.Backend), tf.NodeNetNS)
	if err != nil {
		return fail(err)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("component", "tunnel")
	tun, err := tunnel.New(log, tf.Config, tf.NodeNetNS, tf.ProxyNetNS, backend)
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
	rec := reconcile.New(log.With("component", "reconciler"), reconcile.Options{Interval: tf.Interval}, reconcile.NewTunnel(tun))
	_ = rec.Run(ctx)
	if err := tun.Remove(context.WithoutCancel(ctx)); err != nil {
		return fail(err)
	}
	return 0
}

func loadTunnelFile(path string) (tunnelFile, error) {
	var tf tunnelFile
	data, err := os.ReadFile(path)
	if err != nil {
		return tf, fmt.Errorf("config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&tf); err != nil && !errors.Is(err, io.EOF) {
		return tf, fmt.Errorf("%s: not valid tunnel YAML: %w", path, err)
	}
	if tf.Interval == 0 {
		tf.Interval = 10 * time.Second
	}
	return tf, nil
}
