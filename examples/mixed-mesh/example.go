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
	"github.com/baremesh/baremesh/sources/kube/kubetest"
)

type options struct {
	dir               string // the example's directory
	xdsAddr, httpAddr string
	log               *slog.Logger
}

// example is the running example.
type example struct {
	cluster *kubetest.Cluster
	d       *daemon.Daemon
	cc      *grpc.ClientConn
	closers []func()
}

func (e *example) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
}

// start brings everything up and returns once baremeshd has its first
// snapshot.
func start(ctx context.Context, o options) (ex *example, err error) {
	ex = &example{}
	defer func() {
		if err != nil {
			ex.close()
		}
	}()
	hostIP, err := localIPv4()
	if err != nil {
		return nil, err
	}
	podPort, err := backend(ex, "pod-1", hostIP)
	if err != nil {
		return nil, err
	}
	vmPort, err := backend(ex, "vm-1", "127.0.0.1")
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
	cfg, err := daemon.ReadFile(filepath.Join(work, "baremesh.yaml"))
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
	return ex, nil
}

// call makes n RPCs once the first succeeds and counts who answered.
func (e *example) call(ctx context.Context, n int) (map[string]int, error) {
	seen := map[string]int{}
	deadline := time.Now().Add(60 * time.Second)
	for len(seen) == 0 || sum(seen) < n {
		var hdr metadata.MD
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := healthpb.NewHealthClient(e.cc).Check(cctx, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr))
		cancel()
		switch {
		case err == nil:
			seen[strings.Join(hdr.Get("backend"), ",")]++
		case len(seen) > 0:
			return seen, fmt.Errorf("RPC failed after the first success: %w", err)
		case time.Now().After(deadline):
			return seen, fmt.Errorf("no RPC succeeded in 60 s: %w", err)
		case ctx.Err() != nil:
			return seen, ctx.Err()
		default:
			time.Sleep(100 * time.Millisecond) // config not there yet
		}
	}
	return seen, nil
}

func sum(m map[string]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

// backend starts a gRPC health server that names itself in a header.
func backend(ex *example, name, host string) (int, error) {
	lis, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	s := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		_ = grpc.SetHeader(ctx, metadata.Pairs("backend", name))
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(lis) }()
	ex.closers = append(ex.closers, s.Stop)
	return lis.Addr().(*net.TCPAddr).Port, nil
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
