package chaos

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baremesh/baremesh/core/identity"
)

// proxy is one simulated sidecar: an ADS stream over the TLS port with a
// workload certificate, auto-registering into WorkloadGroup default/vm,
// subscribed to every cluster. When its stream ends it moves to the next
// replica after a short backoff, as a client with several addresses does.
type proxy struct {
	i    int
	ip   string
	at   atomic.Int32 // 1 + the index of the replica it holds a stream to; 0: none
	tick atomic.Int64 // the newest config tick it has received
	// next, if not 0, is 1 + the replica to move to (moveTo); cancel
	// ends the current stream.
	next   atomic.Int32
	cancel atomic.Pointer[context.CancelFunc]
}

// moveTo ends the proxy's stream and has it reconnect to replica k at
// once (the test spreading the proxies again, as an operator draining a
// replica would).
func (p *proxy) moveTo(k int) {
	p.next.Store(int32(k + 1))
	if c := p.cancel.Load(); c != nil {
		(*c)()
	}
}

const clusterURL = "type.googleapis.com/envoy.config.cluster.v3.Cluster"

func (p *proxy) key() string { return "default/vm-" + p.ip }

func (p *proxy) run(ctx context.Context, rs []*replica, l *lan, creds credentials.TransportCredentials) {
	md, _ := structpb.NewStruct(map[string]any{"AUTO_REGISTER_GROUP": "vm"})
	node := &corev3.Node{Id: fmt.Sprintf("sidecar~%s~vm-%d.default~default.svc.cluster.local", p.ip, p.i), Metadata: md}
	dial := grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return l.dial(ctx, "tcp", addr) })
	for k := p.i % len(rs); ctx.Err() == nil; {
		sctx, cancel := context.WithCancel(ctx)
		p.cancel.Store(&cancel)
		if n := p.next.Swap(0); n > 0 { // a move asked before the stream began
			k = int(n - 1)
		}
		p.stream(sctx, k, rs[k], node, dial, creds)
		cancel()
		p.at.Store(0)
		if n := p.next.Swap(0); n > 0 {
			k = int(n - 1)
			continue
		}
		k = (k + 1) % len(rs)
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(200+rand.IntN(300)) * time.Millisecond): // a client's backoff
		}
	}
}

func (p *proxy) stream(ctx context.Context, k int, r *replica, node *corev3.Node, dial grpc.DialOption, creds credentials.TransportCredentials) {
	cc, err := grpc.NewClient(r.tlsAddr(), grpc.WithTransportCredentials(creds), dial)
	if err != nil {
		return
	}
	defer cc.Close()
	st, err := discovery.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		return
	}
	if st.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: clusterURL}) != nil {
		return
	}
	for {
		resp, err := st.Recv()
		if err != nil {
			return
		}
		p.at.Store(int32(k + 1))
		p.tick.Store(max(p.tick.Load(), newestTick(resp)))
		if st.Send(&discovery.DiscoveryRequest{TypeUrl: clusterURL, VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce}) != nil {
			return
		}
	}
}

// newestTick is the highest N of the clusters for tick-N.chaos.local.
func newestTick(resp *discovery.DiscoveryResponse) int64 {
	var best int64
	for _, a := range resp.Resources {
		var c clusterv3.Cluster
		if proto.Unmarshal(a.Value, &c) != nil {
			continue
		}
		_, host, ok := strings.Cut(strings.TrimPrefix(c.Name, "outbound|80||"), "tick-")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSuffix(host, ".chaos.local"), 10, 64); err == nil {
			best = max(best, n)
		}
	}
	return best
}

// proxyCreds signs count workload certificates for default/vm with the
// cluster's CA (its files under a replica's state directory) and returns
// TLS credentials for each, trusting the CA's root, dialing the name the
// proxies use for istiod.
func proxyCreds(t *testing.T, state string, count int) ([]credentials.TransportCredentials, []byte) {
	t.Helper()
	ca, err := identity.LoadCA(identity.CAOptions{Dir: filepath.Join(state, "ca")})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.RootPEM())
	var out []credentials.TransportCredentials
	for range count {
		iss, key, err := ca.IssueWorkload(identity.ID{TrustDomain: "cluster.local", Namespace: "default", ServiceAccount: "vm"}, 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		var chain [][]byte
		for _, p := range iss.Chain[:len(iss.Chain)-1] {
			if blk, _ := pem.Decode([]byte(p)); blk != nil {
				chain = append(chain, blk.Bytes)
			}
		}
		out = append(out, credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "istiod.istio-system.svc",
			Certificates: []tls.Certificate{{Certificate: chain, PrivateKey: key}}}))
	}
	return out, ca.RootPEM()
}

// writeTick writes the config file changed every second: one
// ServiceEntry whose host names the tick (written to a temporary file
// and renamed, as an operator's tool would).
func writeTick(dir string, n int64) error {
	body := fmt.Sprintf(`apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: tick, namespace: default}
spec:
  hosts: [tick-%d.chaos.local]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  location: MESH_INTERNAL
`, n)
	tmp := filepath.Join(filepath.Dir(dir), ".tick.yaml.tmp") // outside the watched directory
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "tick.yaml"))
}
