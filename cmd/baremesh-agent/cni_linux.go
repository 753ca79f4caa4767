package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/baremesh/baremesh/nodeagent/agent"
	"github.com/baremesh/baremesh/nodeagent/cni/install"
)

// runCNI is `baremesh-agent cni install|uninstall`:
//
//	baremesh-agent cni install [-bin-dir /opt/cni/bin] [-conf-dir /etc/cni/net.d]
//	    [-conf-name FILE] [-kubeconfig FILE] [-exclude-namespaces a,b]
//	    [-ambient] [-tunnel-config FILE] [-watch] [-ready-file PATH]
//	baremesh-agent cni uninstall [-bin-dir ...] [-conf-dir ...]
func runCNI(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "repair" {
		return runRepair(ctx, args[1:], stderr) // repair_linux.go
	}
	if len(args) == 0 || (args[0] != "install" && args[0] != "uninstall") {
		fmt.Fprintln(stderr, "usage: baremesh-agent cni install|uninstall|repair [flags]")
		return 2
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("baremesh-agent cni "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	self, _ := os.Executable()
	binDir := fs.String("bin-dir", "/opt/cni/bin", "the node's CNI bin dir")
	confDir := fs.String("conf-dir", "/etc/cni/net.d", "the node's CNI config dir")
	confName := fs.String("conf-name", "", "config file to chain into (default: the first .conf/.conflist in lexical order)")
	plugin := fs.String("plugin", filepath.Join(filepath.Dir(self), "baremesh-cni"), "the baremesh-cni binary to copy")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig for the plugin (default: one made from the pod's service account)")
	exclude := fs.String("exclude-namespaces", "kube-system,baremesh-system", "namespaces the plugin leaves alone")
	ambient := fs.Bool("ambient", false, "enable ambient decisions (namespace label istio.io/dataplane-mode=ambient)")
	tunnelConfig := fs.String("tunnel-config", "", "the node tunnel's config (agent.yaml with a tunnel: section, or tunnel.yaml): the plugin enrols ambient pods with its mark")
	watch := fs.Bool("watch", false, "keep running: re-insert the plugin when the main CNI rewrites its config")
	readyFile := fs.String("ready-file", "", "file created while the plugin is chained (for a readiness probe)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("component", "cni-install")
	opts := install.Options{BinDir: *binDir, ConfDir: *confDir, ConfName: *confName, Binaries: []string{*plugin},
		Plugin: map[string]any{"ambientEnabled": *ambient, "kubernetes": map[string]any{"excludeNamespaces": splitComma(*exclude)}}}
	if *tunnelConfig != "" && cmd == "install" {
		mark, err := agent.TunnelMark(*tunnelConfig)
		if err != nil {
			fmt.Fprintf(stderr, "baremesh-agent cni install: -tunnel-config: %v\n", err)
			return 1
		}
		opts.Plugin["ambientMark"] = mark
	}
	if cmd == "install" {
		kc, err := install.Kubeconfig(*kubeconfig)
		if err != nil {
			fmt.Fprintf(stderr, "baremesh-agent cni install: %v\n", err)
			return 1
		}
		opts.Kubeconfig = kc
	}
	if *watch {
		opts.ReadyFile = *readyFile
	}
	in := install.New(log, opts)
	if cmd == "uninstall" {
		if err := in.Uninstall(); err != nil {
			fmt.Fprintf(stderr, "baremesh-agent cni uninstall: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, "baremesh-cni removed")
		return 0
	}
	if !*watch {
		if err := in.Install(); err != nil {
			fmt.Fprintf(stderr, "baremesh-agent cni install: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "baremesh-cni chained into %s\n", in.ConfFile())
		return 0
	}
	if err := in.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "baremesh-agent cni install: %v\n", err)
		return 1
	}
	return 0
}

func splitComma(s string) []any {
	var out []any
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
