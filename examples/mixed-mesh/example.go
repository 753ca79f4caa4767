package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/xds"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/baremesh/baremesh/internal/daemon"
	"github.com/baremesh/baremesh/internal/daemonconfig"
	"github.com/baremesh/baremesh/sources/kube/kubetest"
)

type options struct {
	dir               string // the example's directory
	xdsAddr, httpAddr string
	log               *slog.Logger
	// vmServeDelay: the VM backend refuses connections for this long
	// (tests: a backend that connects later than the other).
	vmServeDelay time.Duration
}

// example is the running example.
type example struct {
	cluster *kubetest.Cluster
	d       *daemon.Daemon
	cc      *grpc.ClientConn
	closers []func()
	// clientUp is closed when the xDS client exists, closed by close.
	clientUp, closed chan struct{}
}

func (e *example) close() {
	close(e.closed)
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
}

// start brings everything up and returns once baremeshd has its first
// snapshot.
func start(ctx context.Context, o options) (ex *example, err error) {
	ex = &example{clientUp: make(chan struct{}), closed: make(chan struct{})}
	defer func() {
		if err != nil {
			ex.close()
		}
	}()
	hostIP, err := localIPv4()
	if err != nil {
		return nil, err
	}
	podPort, err := backend(ex, "pod-1", hostIP, 0)
	if err != nil {
		return nil, err
	}
	vmPort, err := backend(ex, "vm-1", "127.0.0.1", o.vmServeDelay)
	if err != nil {
		return nil, err
	}
	o.log.Info("starting kube-apiserver and etcd")
	if ex.cluster, err = kubetest.StartCluster(true); err != nil {
		return nil, err
	}
	ex.closers = append(ex.closers, ex.cluster.Stop)
	if err := apply(ctx, ex.cluster, filepath.Join(o.dir, "clusterrole.yaml"), nil); err != nil {
		return nil, err
	}
	if err := apply(ctx, ex.cluster, filepath.Join(o.dir, "kube", "echo.yaml"), strings.NewReplacer("POD_IP", hostIP, "POD_PORT", strconv.Itoa(podPort))); err != nil {
		return nil, err
	}

	work, err := os.MkdirTemp("", "mixed-mesh-")
	if err != nil {
		return nil, err
	}
	ex.closers = append(ex.closers, func() { os.RemoveAll(work) })
	// The user "baremesh" is in no group: it can do only what
	// clusterrole.yaml grants.
	kc, err := ex.cluster.KubeconfigFor("baremesh", []string{})
	if err != nil {
		return nil, err
	}
	vm, err := os.ReadFile(filepath.Join(o.dir, "conf.d", "vm.yaml"))
	if err != nil {
		return nil, err
	}
	cfgFile, err := os.ReadFile(filepath.Join(o.dir, "baremesh.yaml"))
	if err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{
		"baremesh.yaml":      cfgFile,
		"conf.d/vm.yaml":     []byte(strings.ReplaceAll(string(vm), "VM_PORT", strconv.Itoa(vmPort))),
		"clusters.d/k1.yaml": kc,
	} {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			return nil, err
		}
	}
	cfg, err := daemonconfig.ReadFile(filepath.Join(work, "baremesh.yaml"))
	if err != nil {
		return nil, err
	}
	cfg.XDSAddr, cfg.HTTPAddr = o.xdsAddr, o.httpAddr
	cfg.MeshConfig = filepath.Join(work, "meshconfig.yaml") // absent: Istio's defaults
	if ex.d, err = daemon.New(cfg, o.log); err != nil {
		return nil, err
	}
	dctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ex.d.Run(dctx) }()
	ex.closers = append(ex.closers, func() { cancel(); <-done })
	select {
	case <-ex.d.Pipeline().Ready():
	case <-time.After(60 * time.Second):
		return nil, errors.New("baremeshd not ready after 60 s")
	case <-ctx.Done():
		return nil, ctx.Err()
	}

	bootstrap := fmt.Sprintf(`{
  "xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
  "node": {"id": "sidecar~127.0.0.1~client.default~default.svc.cluster.local", "metadata": {"GENERATOR": "grpc", "NAMESPACE": "default"}}
}`, ex.d.XDSAddr())
	res, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		return nil, err
	}
	if ex.cc, err = grpc.NewClient("xds:///echo.mixed.svc.cluster.local:7070", grpc.WithResolvers(res), grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		return nil, err
	}
	ex.closers = append(ex.closers, func() { ex.cc.Close() })
	close(ex.clientUp)
	return ex, nil
}

// backends are the names of the example's backends.
var backends = []string{"pod-1", "vm-1"}

// call makes RPCs until every backend has answered once, then n more,
// and counts who answered those n. The client's round robin spreads
// RPCs over the backends it is connected to: counting from the first
// success, while the other backend's connection was still being made (a
// slow or loaded host), gave "pod 20, VM 0" (2 of 21 runs).
func (e *example) call(ctx context.Context, n int) (map[string]int, error) {
	warm := map[string]int{}
	deadline := time.Now().Add(60 * time.Second)
	for len(warm) < len(backends) {
		name, err := e.rpc(ctx)
		switch {
		case err == nil:
			warm[name]++
			continue
		case ctx.Err() != nil:
			return warm, ctx.Err()
		case time.Now().After(deadline) && len(warm) == 0:
			return warm, fmt.Errorf("no RPC succeeded in 60 s: %w", err)
		case time.Now().After(deadline):
			return warm, fmt.Errorf("in 60 s only %v answered: %w", warm, err)
		}
		time.Sleep(100 * time.Millisecond) // config or connections not there yet
	}
	// Every backend has answered, so each is connected: a failure now
	// is one.
	seen := map[string]int{}
	for sum(seen) < n {
		name, err := e.rpc(ctx)
		if err != nil {
			return seen, fmt.Errorf("RPC failed after every backend answered: %w", err)
		}
		seen[name]++
	}
	return seen, nil
}

// rpc makes one RPC and returns the name of the backend that answered.
func (e *example) rpc(ctx context.Context) (string, error) {
	var hdr metadata.MD
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := healthpb.NewHealthClient(e.cc).Check(cctx, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr))
	return strings.Join(hdr.Get("backend"), ","), err
}

func sum(m map[string]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

// backend starts a gRPC health server that names itself in a header,
// serving after delay.
func backend(ex *example, name, host string, delay time.Duration) (int, error) {
	lis, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	s := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		_ = grpc.SetHeader(ctx, metadata.Pairs("backend", name))
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(s, health.NewServer())
	port := lis.Addr().(*net.TCPAddr).Port
	if delay > 0 {
		// An injected late backend (options.vmServeDelay): connections
		// are refused until it listens again on its port, delay after
		// the client is made.
		lis.Close()
		go func() {
			select { // from when the client exists
			case <-ex.clientUp:
			case <-ex.closed:
				return
			}
			time.Sleep(delay) // the injected fault, not synchronisation
			if l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port))); err == nil {
				_ = s.Serve(l)
			}
		}()
	} else {
		go func() { _ = s.Serve(lis) }()
	}
	ex.closers = append(ex.closers, s.Stop)
	return port, nil
}

// localIPv4 is a non-loopback address of this host: Kubernetes refuses
// loopback addresses in EndpointSlices; traffic to it stays local.
func localIPv4() (string, error) {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String(), nil
		}
	}
	return "", errors.New("this host has no non-loopback IPv4 address for the pod's EndpointSlice")
}

// apply creates the objects of a manifest file (after r's replacements).
func apply(ctx context.Context, c *kubetest.Cluster, path string, r *strings.Replacer) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	text := string(data)
	if r != nil {
		text = r.Replace(text)
	}
	for _, doc := range strings.Split(text, "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := create(ctx, c, obj); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

func create(ctx context.Context, c *kubetest.Cluster, obj runtime.Object) error {
	var err error
	o := metav1.CreateOptions{}
	switch v := obj.(type) {
	case *corev1.Namespace:
		_, err = c.Client.CoreV1().Namespaces().Create(ctx, v, o)
	case *corev1.Service:
		_, err = c.Client.CoreV1().Services(v.Namespace).Create(ctx, v, o)
	case *discoveryv1.EndpointSlice:
		_, err = c.Client.DiscoveryV1().EndpointSlices(v.Namespace).Create(ctx, v, o)
	case *rbacv1.ClusterRole:
		_, err = c.Client.RbacV1().ClusterRoles().Create(ctx, v, o)
	case *rbacv1.ClusterRoleBinding:
		_, err = c.Client.RbacV1().ClusterRoleBindings().Create(ctx, v, o)
	default:
		err = fmt.Errorf("the example does not create %T", obj)
	}
	return err
}
