package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/baremesh/baremesh/nodeagent/cni/install"
	"github.com/baremesh/baremesh/nodeagent/tunnel"
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
		mark, err := tunnelMark(*tunnelConfig)
		if err != nil {
			fmt.Fprintf(stderr, "baremesh-agent cni install: -tunnel-config: %v\n", err)
			return 1
		}
		opts.Plugin["ambientMark"] = mark
	}
	if cmd == "install" {
		kc, err := pluginKubeconfig(*kubeconfig)
		if err != nil {
			fmt.Fprintf(stderr, "baremesh-agent cni install: %v\n", err)
			return 1
		}
		opts.Kubeconfig = kc
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
	if *readyFile != "" {
		go reportReady(ctx, in, *readyFile)
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

// pluginKubeconfig reads the given kubeconfig, or makes one from the
// in-cluster service account (as istio-cni's installer does).
func pluginKubeconfig(path string) ([]byte, error) {
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
		return b, nil
	}
	const sa = "/var/run/secrets/kubernetes.io/serviceaccount"
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	token, err := os.ReadFile(sa + "/token")
	if host == "" || err != nil {
		return nil, errors.New("no -kubeconfig given and not running in a pod (no KUBERNETES_SERVICE_HOST or service account token)")
	}
	ca, err := os.ReadFile(sa + "/ca.crt")
	if err != nil {
		return nil, fmt.Errorf("service account CA: %w", err)
	}
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://%s
    certificate-authority-data: %s
users:
- name: baremesh-cni
  user:
    token: %s
contexts:
- name: baremesh-cni
  context: {cluster: local, user: baremesh-cni}
current-context: baremesh-cni
`, joinHostPort(host, port), b64(ca), strings.TrimSpace(string(token)))), nil
}

// tunnelMark reads the node tunnel's mark from its configuration: an
// agent.yaml (its tunnel: section) or a tunnel.yaml, so that the plugin's
// enrolments always carry the mark the tunnel redirects.
func tunnelMark(path string) (uint32, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var doc struct {
		Tunnel        *tunnel.Config `yaml:"tunnel"`
		tunnel.Config `yaml:",inline"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	c := doc.Config
	if doc.Tunnel != nil {
		c = *doc.Tunnel
	}
	return c.WithDefaults().Mark, nil
}
