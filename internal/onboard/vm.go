package onboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	networking "istio.io/api/networking/v1alpha3"
	"sigs.k8s.io/yaml"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/identity"
	"github.com/baremesh/baremesh/internal/daemonconfig"
	"github.com/baremesh/baremesh/sources/file"
)

// istiodHost is the name Istio's agent expects its control plane under
// (and checks in the server certificate); the `hosts` file maps it to
// baremeshd's address.
const istiodHost = "istiod.istio-system.svc"

type vmOptions struct {
	namespace, group, out, address, clusterID string
	ttl                                       time.Duration
	uses                                      int
	autoRegister, dnsCapture                  bool
	envoy                                     bool   // an Envoy bootstrap instead of Istio's agent files (envoy.go)
	ip, name                                  string // with envoy: the VM's IP and workload name
}

// vmBootstrap writes what Istio's VM package reads, as `istioctl x workload
// entry configure` does: cluster.env, mesh.yaml, root-cert.pem, istio-token
// (a join token for the group's service account) and hosts.
func vmBootstrap(args []string, stdout, stderr io.Writer) int {
	fs := flags("vm bootstrap", "--namespace NS --group WG --out DIR [--address HOST:PORT] [--ttl 1h] [--uses N] [--autoregister=false]\n"+
		"       baremeshctl vm bootstrap --envoy --ip VM_IP --namespace NS --group WG --out DIR [--address HOST:PORT] [--name NAME] [--ttl 8760h]",
		"  # Istio's agent on the VM (copy the files where Istio's VM guide says):\n"+
			"  baremeshctl vm bootstrap --config /etc/baremesh/baremesh.yaml --namespace bookinfo --group reviews --out vm-files --address 10.0.0.1:15012\n"+
			"  # Envoy alone on the VM (xDS on the TLS port, the join token as its credential):\n"+
			"  baremeshctl vm bootstrap --config /etc/baremesh/baremesh.yaml --envoy --ip 10.0.0.11 --name reviews-vm-1 --namespace bookinfo --group reviews --address 10.0.0.1:15012 --out vm-files\n", stderr)
	var c common
	c.register(fs)
	var o vmOptions
	fs.StringVar(&o.namespace, "namespace", "", "namespace of the WorkloadGroup (required)")
	fs.StringVar(&o.group, "group", "", "WorkloadGroup name, read from the config directories (required)")
	fs.StringVar(&o.out, "out", "", "output directory (required)")
	fs.StringVar(&o.address, "address", "", "baremeshd's TLS address (tlsAddr) as the VM reaches it, HOST:PORT (default: this host's name and tlsAddr's port)")
	fs.StringVar(&o.clusterID, "cluster-id", "Kubernetes", "ISTIO_META_CLUSTER_ID")
	fs.DurationVar(&o.ttl, "ttl", 0, "join token lifetime (default 1h: the first certificate must be fetched within it; with --envoy 8760h: the token is Envoy's credential on every connection)")
	fs.IntVar(&o.uses, "uses", 0, "join token uses (0: any number within its ttl)")
	fs.BoolVar(&o.autoRegister, "autoregister", true, "set ISTIO_META_AUTO_REGISTER_GROUP: the VM gets a WorkloadEntry from the group's template while connected, and its health reports count (--autoregister=false if you write its WorkloadEntry yourself)")
	fs.BoolVar(&o.dnsCapture, "capture-dns", true, "set ISTIO_META_DNS_CAPTURE")
	fs.BoolVar(&o.envoy, "envoy", false, "write envoy-bootstrap.yaml and root-cert.pem for Envoy without Istio's agent (ADS over TLS to --address, the join token as its bearer credential)")
	fs.StringVar(&o.ip, "ip", "", "with --envoy: the VM's IP address (required)")
	fs.StringVar(&o.name, "name", "", "with --envoy: the workload's name in the node ID (default GROUP-IP)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if o.namespace == "" || o.group == "" || o.out == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "baremeshctl vm bootstrap: --namespace, --group and --out are required (baremeshctl vm bootstrap -h: every flag, with examples)")
		return 2
	}
	if o.ttl == 0 {
		o.ttl = time.Hour
		if o.envoy {
			o.ttl = 365 * 24 * time.Hour
		}
	}
	cfg, err := c.load()
	if err != nil {
		return fail(stderr, err)
	}
	if o.envoy {
		id, err := envoyBootstrap(cfg, o)
		if err != nil {
			return fail(stderr, err)
		}
		fmt.Fprintf(stdout, "wrote %s: node %s\n", filepath.Join(o.out, EnvoyBootstrapFile), id)
		return 0
	}
	if err := bootstrap(cfg, o, stderr); err != nil {
		return fail(stderr, err)
	}
	fmt.Fprintf(stdout, "wrote %s: cluster.env mesh.yaml root-cert.pem istio-token hosts\n", o.out)
	return 0
}

func bootstrap(cfg daemonconfig.Config, o vmOptions, stderr io.Writer) error {
	wg, labels, err := findGroup(cfg.ConfigDirs, o.namespace, o.group)
	if err != nil {
		return err
	}
	mesh, err := config.LoadMeshConfig(cfg.MeshConfig)
	if err != nil {
		return fmt.Errorf("mesh config: %w", err)
	}
	root, err := os.ReadFile(filepath.Join(cfg.CADir(), identity.RootCertFile))
	if err != nil {
		return fmt.Errorf("CA root (does baremeshd run with tlsAddr set, or is caCertsDir right?): %w", err)
	}
	discovery, hosts, err := vmAddress(cfg, o.address)
	if err != nil {
		return err
	}
	sa := wg.GetTemplate().GetServiceAccount()
	if sa == "" {
		sa = "default"
	}
	tok, rec, err := (&identity.TokenStore{Dir: tokenDir(cfg)}).Create(identity.TokenSpec{
		Namespace: o.namespace, ServiceAccount: sa, Group: o.group, TTL: o.ttl, MaxUses: o.uses})
	if err != nil {
		return err
	}
	pc := mesh.GetDefaultConfig()
	md := map[string]string{}
	for k, v := range pc.GetProxyMetadata() {
		md[k] = v
	}
	svc, rev := canonical(labels, o.group)
	labels["service.istio.io/canonical-name"], labels["service.istio.io/canonical-revision"] = svc, rev
	lj, _ := json.Marshal(labels)
	for k, v := range map[string]string{
		"CANONICAL_SERVICE": svc, "CANONICAL_REVISION": rev, "POD_NAMESPACE": o.namespace,
		"SERVICE_ACCOUNT": sa, "TRUST_DOMAIN": mesh.GetTrustDomain(), "ISTIO_META_CLUSTER_ID": o.clusterID,
		"ISTIO_META_MESH_ID": pc.GetMeshId(), "ISTIO_META_NETWORK": wg.GetTemplate().GetNetwork(),
		"ISTIO_META_WORKLOAD_NAME": o.group, "ISTIO_METAJSON_LABELS": string(lj),
	} {
		md[k] = v
	}
	if p := podPorts(wg.GetTemplate().GetPorts()); p != "" {
		md["ISTIO_META_POD_PORTS"] = p
	}
	if o.dnsCapture {
		md["ISTIO_META_DNS_CAPTURE"] = "true"
	}
	if o.autoRegister {
		md["ISTIO_META_AUTO_REGISTER_GROUP"] = o.group
	}
	meshYAML, err := proxyConfigYAML(discovery, md, wg.GetProbe())
	if err != nil {
		return err
	}
	env := map[string]string{}
	for k, v := range md {
		env[k] = v
	}
	inbound := "*"
	if ports := wg.GetTemplate().GetPorts(); len(ports) > 0 {
		var ps []string
		for _, p := range ports {
			ps = append(ps, fmt.Sprint(p))
		}
		sort.Strings(ps)
		inbound = strings.Join(ps, ",")
	}
	for k, v := range map[string]string{
		"ISTIO_INBOUND_PORTS": inbound, "ISTIO_NAMESPACE": o.namespace, "ISTIO_SERVICE": o.group + "." + o.namespace,
		"ISTIO_SERVICE_CIDR": "*", "ISTIO_LOCAL_EXCLUDE_PORTS": "22,15090,15021,15020", "SERVICE_ACCOUNT": sa,
		"CA_ADDR": discovery,
	} {
		env[k] = v
	}
	if err := os.MkdirAll(o.out, 0o700); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{"cluster.env", []byte(envFile(env)), 0o644},
		{"mesh.yaml", meshYAML, 0o644},
		{"root-cert.pem", root, 0o644},
		{"istio-token", []byte(tok), 0o600},
		{"hosts", []byte(hosts), 0o644},
	} {
		if err := os.WriteFile(filepath.Join(o.out, f.name), f.data, f.mode); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "join token %s for %s/%s (group %s) expires %s; it buys the first certificate, and Istio's agent presents it on renewals over the connection it keeps until it is refused, then renews with its certificate\n",
		rec.ID, o.namespace, sa, o.group, rec.Expires.Format(time.RFC3339))
	return nil
}

// vmAddress returns the discovery/CA address and the hosts file: an IP
// address is reached under Istio's name istiod.istio-system.svc (which the
// server certificate carries), mapped in hosts, as istioctl does.
func vmAddress(cfg daemonconfig.Config, address string) (string, string, error) {
	if address == "" {
		_, port, err := net.SplitHostPort(cfg.TLSAddr)
		if err != nil {
			port = "15012"
		}
		host, err := os.Hostname()
		if err != nil {
			return "", "", err
		}
		address = net.JoinHostPort(host, port)
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return "", "", fmt.Errorf("--address %q: %w", address, err)
	}
	if net.ParseIP(host) != nil {
		return net.JoinHostPort(istiodHost, port), host + " " + istiodHost + "\n", nil
	}
	return address, "", nil
}

// findGroup reads the WorkloadGroup ns/name from the config directories
// with the file source's parser.
func findGroup(dirs []string, ns, name string) (*networking.WorkloadGroup, map[string]string, error) {
	var found *config.Config
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || found != nil {
				return err
			}
			switch strings.ToLower(filepath.Ext(p)) {
			case ".yaml", ".yml", ".json":
			default:
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			cfgs, _ := file.Parse(data, p, "baremeshctl")
			for i := range cfgs {
				if cfgs[i].GVK.Kind == string(config.WorkloadGroup) && cfgs[i].Namespace == ns && cfgs[i].Name == name {
					found = &cfgs[i]
				}
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, err
		}
	}
	if found == nil {
		if len(dirs) == 0 {
			return nil, nil, fmt.Errorf("WorkloadGroup %s/%s: the config names no configDirs to read it from (is --config the baremesh.yaml baremeshd runs with?)", ns, name)
		}
		return nil, nil, fmt.Errorf("WorkloadGroup %s/%s not found in the config directories %s", ns, name, strings.Join(dirs, ", "))
	}
	wg := found.Spec.(*networking.WorkloadGroup)
	labels := map[string]string{}
	for k, v := range wg.GetMetadata().GetLabels() {
		labels[k] = v
	}
	for k, v := range wg.GetTemplate().GetLabels() {
		labels[k] = v
	}
	return wg, labels, nil
}

// canonical picks the canonical service and revision as Istio does.
func canonical(l map[string]string, group string) (string, string) {
	first := func(def string, keys ...string) string {
		for _, k := range keys {
			if v := l[k]; v != "" {
				return v
			}
		}
		return def
	}
	return first(group, "service.istio.io/canonical-name", "app.kubernetes.io/name", "app"),
		first("latest", "service.istio.io/canonical-revision", "app.kubernetes.io/version", "version")
}

func podPorts(ports map[string]uint32) string {
	type podPort struct {
		Name          string `json:"name,omitempty"`
		ContainerPort int    `json:"containerPort"`
	}
	var out []podPort
	for n, p := range ports {
		out = append(out, podPort{n, int(p)})
	}
	if len(out) == 0 {
		return ""
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	b, _ := json.Marshal(out)
	return string(b)
}

func proxyConfigYAML(discovery string, md map[string]string, probe *networking.ReadinessProbe) ([]byte, error) {
	dc := map[string]any{"discoveryAddress": discovery, "proxyMetadata": md}
	if probe != nil {
		b, err := protojson.Marshal(probe)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		dc["readinessProbe"] = m
	}
	return yaml.Marshal(map[string]any{"defaultConfig": dc})
}

// envFile writes KEY='value' lines, sorted, single-quoted for the shell.
func envFile(m map[string]string) string {
	var lines []string
	for k, v := range m {
		lines = append(lines, k+"='"+strings.ReplaceAll(v, "'", `'"'"'`)+"'")
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}
