package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/baremesh/baremesh/nodeagent/cni"
	"github.com/baremesh/baremesh/nodeagent/repair"
)

// runRepair is `baremesh-agent cni repair`, the repair controller:
//
//	baremesh-agent cni repair -node NODE [-kubeconfig FILE] [-mode label|delete]
//	    [-exclude-namespaces a,b] [-ambient] [-ready-since RFC3339]
//	    [-delete-rate 1] [-delete-burst 5]
func runRepair(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("baremesh-agent cni repair", flag.ContinueOnError)
	fs.SetOutput(stderr)
	node := fs.String("node", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (default: in-cluster service account)")
	mode := fs.String("mode", string(repair.ModeLabel), "label broken pods ("+repair.LabelBroken+"=reason) or delete them")
	exclude := fs.String("exclude-namespaces", "kube-system,baremesh-system", "namespaces never touched (as given to cni install)")
	ambient := fs.Bool("ambient", false, "ambient decisions, as given to cni install")
	// Not the installer's -ready-file: it is rewritten every second, so
	// its modification time says nothing about when the plugin was chained.
	readySince := fs.String("ready-since", "", "when baremesh-cni was first chained on this node (RFC 3339); pods created before need repair; empty turns that rule off")
	rate := fs.Float64("delete-rate", 1, "pod deletions per second at most")
	burst := fs.Int("delete-burst", 5, "deletions allowed in a burst")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "baremesh-agent cni repair: %v\n", err)
		return 1
	}
	var since time.Time
	if *readySince != "" {
		t, err := time.Parse(time.RFC3339, *readySince)
		if err != nil {
			return fail(fmt.Errorf("-ready-since: %w", err))
		}
		since = t
	}
	cs, err := repair.Client(*kubeconfig)
	if err != nil {
		return fail(err)
	}
	plugin := &cni.PluginConfig{AmbientEnabled: *ambient}
	for _, ns := range splitComma(*exclude) {
		plugin.Kubernetes.ExcludeNamespaces = append(plugin.Kubernetes.ExcludeNamespaces, ns.(string))
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("component", "cni-repair")
	c, err := repair.New(log, cs, repair.Options{Node: *node, Mode: repair.Mode(*mode), Plugin: plugin,
		ReadySince: since, DeleteRate: *rate, DeleteBurst: *burst})
	if err != nil {
		return fail(err)
	}
	if err := c.Run(ctx); err != nil {
		return fail(err)
	}
	return 0
}
