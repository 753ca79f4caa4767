package cni

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/baremesh/baremesh/nodeagent/nstest"
)

// node is a test "node": a network namespace where the runtime (libcni)
// runs the real bridge + host-local plugins with ours chained after them,
// a kubeconfig reaching the real API server, and pods as namespaces.
type node struct {
	ns       *nstest.NS
	cni      *libcni.CNIConfig
	list     *libcni.NetworkConfigList
	lo       *libcni.NetworkConfig
	kube     kubernetes.Interface
	dir      string
	subnet   string // e.g. 10.99.0
	gateway  string
	kubeconf string
}

func newNode(t testing.TB, extra string) *node {
	t.Helper()
	nstest.RequireRoot(t)
	nstest.RequireBinary(t, "iptables-nft-restore")
	nstest.RequireBinary(t, "setpriv")
	cfg := kube(t)
	n := &node{ns: nstest.New(t), dir: t.TempDir(), kube: clientset(t), subnet: "10.99.0", gateway: "10.99.0.1"}
	n.cni = libcni.NewCNIConfigWithCacheDir([]string{binDir(t)}, filepath.Join(n.dir, "cache"), nil)
	n.kubeconf = filepath.Join(n.dir, "kubeconfig")
	writeKubeconfig(t, cfg, forwardAPI(t, n.ns, cfg), n.kubeconf)
	n.list = n.confList(t, n.kubeconf, extra)
	lo, err := libcni.NetworkPluginConfFromBytes([]byte(`{"cniVersion":"1.0.0","name":"lo","type":"loopback"}`))
	if err != nil {
		t.Fatal(err)
	}
	n.lo = lo
	return n
}

// confList is a node conflist as a runtime finds it in /etc/cni/net.d,
// with baremesh-cni appended as the installer does.
func (n *node) confList(t testing.TB, kubeconfig, extra string) *libcni.NetworkConfigList {
	t.Helper()
	raw := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"bmtest","plugins":[
  {"type":"bridge","bridge":"bm0","isGateway":true,"ipMasq":false,
   "ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"%s.0/24"}]],"routes":[{"dst":"0.0.0.0/0"}]}},
  {"type":"baremesh-cni","iptablesBackend":"nft","podLookupTimeout":"2s",
   "kubernetes":{"kubeconfig":%q,"excludeNamespaces":["kube-system"]}%s}]}`,
		filepath.Join(n.dir, "ipam"), n.subnet, kubeconfig, extra)
	list, err := libcni.ConfListFromBytes([]byte(raw))
	if err != nil {
		t.Fatalf("conflist: %v", err)
	}
	return list
}

func runtimeConf(pod *nstest.NS, namespace, name string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: "c-" + pod.Name, NetNS: "/var/run/netns/" + pod.Name, IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", namespace}, {"K8S_POD_NAME", name}},
	}
}

// add runs ADD for the loopback network and the chained list from the
// node's namespace, as a runtime does.
func (n *node) add(pod *nstest.NS, namespace, name string) (types.Result, error) {
	var res types.Result
	err := n.ns.Do(func() error {
		rt := runtimeConf(pod, namespace, name)
		if _, err := n.cni.AddNetwork(context.Background(), n.lo, rt); err != nil {
			return fmt.Errorf("loopback: %w", err)
		}
		var err error
		res, err = n.cni.AddNetworkList(context.Background(), n.list, rt)
		return err
	})
	return res, err
}

func (n *node) do(fn func(rt *libcni.RuntimeConf) error, pod *nstest.NS, namespace, name string) error {
	return n.ns.Do(func() error { return fn(runtimeConf(pod, namespace, name)) })
}

func (n *node) del(t testing.TB, pod *nstest.NS, namespace, name string) {
	t.Helper()
	err := n.do(func(rt *libcni.RuntimeConf) error { return n.cni.DelNetworkList(context.Background(), n.list, rt) }, pod, namespace, name)
	if err != nil {
		t.Errorf("DEL: %v", err)
	}
}

// createPod stores a pod in the API server; sidecar makes it look
// injected (istio-cni mode, no istio-init).
func createPod(t testing.TB, cs kubernetes.Interface, namespace, name string, sidecar bool, anno map[string]string) {
	t.Helper()
	ctx := context.Background()
	_, _ = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	if sidecar {
		p.Annotations[AnnoSidecarStatus] = `{"containers":["istio-proxy"]}`
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: ProxyContainer, Image: "proxy"})
	}
	for k, v := range anno {
		p.Annotations[k] = v
	}
	if _, err := cs.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod %s/%s: %v", namespace, name, err)
	}
}

func podIP(t testing.TB, res types.Result) string {
	t.Helper()
	r, err := current.NewResultFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	for _, ip := range r.IPs {
		if ip.Address.IP.To4() != nil {
			return ip.Address.IP.String()
		}
	}
	t.Fatalf("no IPv4 address in result %+v (prevResult not passed through?)", r)
	return ""
}

func ourRules(t testing.TB, pod *nstest.NS) int {
	t.Helper()
	out := pod.Run(t, "iptables-nft-save")
	return strings.Count(out, "-A BAREMESH_")
}

func expectBanner(t testing.TB, ns *nstest.NS, addr, want string) {
	t.Helper()
	got, err := ns.Banner("tcp4", addr)
	if err != nil || !strings.HasPrefix(got, want) {
		t.Errorf("dial %s from %s: %q, %v; want prefix %q", addr, ns.Name, got, err, want)
	}
}

func TestChainedSidecarCapture(t *testing.T) {
	n := newNode(t, "")
	pod := nstest.New(t)
	createPod(t, n.kube, "shop", "web-1", true, map[string]string{AnnoExcludeOutboundPorts: "5432"})
	res, err := n.add(pod, "shop", "web-1")
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	ip := podIP(t, res)
	if ourRules(t, pod) == 0 {
		t.Fatal("no BAREMESH rules in the pod namespace after ADD")
	}
	// A test proxy in the pod (it reports SO_ORIGINAL_DST), an app, and a
	// server on the node side of the bridge.
	pod.Serve(t, "tcp4", "0.0.0.0:15001", "proxy-out", nstest.ServerOptions{})
	pod.Serve(t, "tcp4", "0.0.0.0:15006", "proxy-in", nstest.ServerOptions{})
	pod.Serve(t, "tcp4", "0.0.0.0:8080", "app", nstest.ServerOptions{})
	n.ns.Serve(t, "tcp4", n.gateway+":9090", "peer", nstest.ServerOptions{})
	n.ns.Serve(t, "tcp4", n.gateway+":5432", "db", nstest.ServerOptions{})

	expectBanner(t, pod, n.gateway+":9090", "proxy-out orig="+n.gateway+":9090")
	expectBanner(t, pod, n.gateway+":5432", "db ")
	expectBanner(t, n.ns, ip+":8080", "proxy-in orig="+ip+":8080")
	if got, err := pod.RunAs(t, 1337, 1337, "banner", "tcp4", n.gateway+":9090"); err != nil || !strings.HasPrefix(got, "peer ") {
		t.Errorf("proxy UID 1337 must bypass capture: %q, %v", got, err)
	}
	if err := n.do(func(rt *libcni.RuntimeConf) error { return n.cni.CheckNetworkList(context.Background(), n.list, rt) }, pod, "shop", "web-1"); err != nil {
		t.Errorf("CHECK: %v", err)
	}
	n.del(t, pod, "shop", "web-1")
	if k := ourRules(t, pod); k != 0 {
		t.Errorf("%d BAREMESH rules left after DEL", k)
	}
}

func TestChainedSkipsPodWithoutSidecar(t *testing.T) {
	n := newNode(t, "")
	pod := nstest.New(t)
	createPod(t, n.kube, "plain", "api-1", false, nil)
	res, err := n.add(pod, "plain", "api-1")
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	podIP(t, res)
	if k := ourRules(t, pod); k != 0 {
		t.Errorf("%d BAREMESH rules for a pod without sidecar", k)
	}
	n.ns.Serve(t, "tcp4", n.gateway+":9090", "peer", nstest.ServerOptions{})
	expectBanner(t, pod, n.gateway+":9090", "peer ")
	n.del(t, pod, "plain", "api-1")
}

func TestChainedErrors(t *testing.T) {
	n := newNode(t, "")
	cases := []struct {
		name string
		list func() *libcni.NetworkConfigList
		pod  string
		want string
		code uint
	}{
		{name: "missing pod", list: func() *libcni.NetworkConfigList { return n.list }, pod: "ghost", want: "pod shop/ghost not found", code: types.ErrInternal},
		{name: "api unreachable", list: func() *libcni.NetworkConfigList {
			bad := filepath.Join(n.dir, "bad-kubeconfig")
			writeKubeconfig(t, kube(t), "https://127.0.0.1:1", bad)
			return n.confList(t, bad, "")
		}, pod: "web-err", want: "reading pod shop/web-err from the Kubernetes API failed", code: types.ErrTryAgainLater},
		{name: "bad annotation", list: func() *libcni.NetworkConfigList { return n.list }, pod: "web-bad", want: "interceptionMode", code: types.ErrInvalidNetworkConfig},
	}
	createPod(t, n.kube, "shop", "web-err", true, nil)
	createPod(t, n.kube, "shop", "web-bad", true, map[string]string{AnnoInterception: "EBPF"})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := nstest.New(t)
			list := tc.list()
			err := n.do(func(rt *libcni.RuntimeConf) error {
				_, err := n.cni.AddNetworkList(context.Background(), list, rt)
				return err
			}, pod, "shop", tc.pod)
			var cerr *types.Error
			if err == nil || !errorAs(err, &cerr) || cerr.Code != tc.code || !strings.Contains(cerr.Error(), tc.want) {
				t.Fatalf("ADD error = %v; want CNI code %d mentioning %q", err, tc.code, tc.want)
			}
			if k := ourRules(t, pod); k != 0 {
				t.Errorf("%d BAREMESH rules after a failed ADD", k)
			}
			_ = n.do(func(rt *libcni.RuntimeConf) error { return n.cni.DelNetworkList(context.Background(), list, rt) }, pod, "shop", tc.pod)
		})
	}
}

// TestBadStdin runs the plugin binary directly with garbage on stdin.
func TestBadStdin(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, PluginName)
	if err := os.Symlink(self, bin); err != nil {
		t.Fatal(err)
	}
	for stdin, want := range map[string]string{
		"{not json": `"code": 6`, // skel rejects it before our code runs
		`{"cniVersion":"1.0.0","name":"x","type":"baremesh-cni","podLookupTimeout":"soon"}`: "podLookupTimeout",
		`{"cniVersion":"1.0.0","name":"x","type":"baremesh-cni"}`:                           "no prevResult",
		`{"cniVersion":"1.0.0","name":"x","type":"baremesh-cni","prevResult":{"ips":"x"}}`:  "decoding prevResult",
	} {
		out, err := runPlugin(bin, "ADD", stdin)
		if err == nil || !strings.Contains(out, `"code"`) || !strings.Contains(out, want) {
			t.Errorf("stdin %q: err %v, stdout %s; want a CNI error result mentioning %q", stdin, err, out, want)
		}
	}
}
