package cni

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/baremesh/baremesh/nodeagent/kubetest"
	"github.com/baremesh/baremesh/nodeagent/nstest"
)

// kube and clientset reach the shared real API server (kubetest).
func kube(t testing.TB) *rest.Config { return kubetest.Config(t) }

func stopKube() { kubetest.Stop() }

func clientset(t testing.TB) kubernetes.Interface { return kubetest.Clientset(t) }

// writeKubeconfig writes a kubeconfig for server with cfg's credentials.
func writeKubeconfig(t testing.TB, cfg *rest.Config, server, path string) {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
}

// forwardAPI makes the API server reachable from inside ns at the same
// host:port: the plugin runs in the node namespace, the API server in the
// test's. Sockets stay in the namespace that made them, so the listener
// accepts in ns and each connection is dialled from here.
func forwardAPI(t testing.TB, ns *nstest.NS, cfg *rest.Config) string {
	t.Helper()
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	if err := ns.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", u.Host)
		return err
	}); err != nil {
		t.Fatalf("listening on %s in %s: %v", u.Host, ns.Name, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	track := func(c net.Conn, add bool) {
		mu.Lock()
		defer mu.Unlock()
		if add {
			conns[c] = true
		} else {
			delete(conns, c)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := (&net.Dialer{}).DialContext(context.Background(), "tcp", u.Host)
			if err != nil {
				in.Close()
				continue
			}
			track(in, true)
			track(out, true)
			wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				_, _ = io.Copy(dst, src)
				dst.Close()
				src.Close()
				track(dst, false)
				track(src, false)
			}
			go pipe(in, out)
			go pipe(out, in)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "https://" + u.Host
}
