package onboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/miekg/dns"
	"github.com/vishvananda/netns"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/daemon"
)

const dnsServices = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ratings, namespace: bookinfo}
spec:
  hosts: [ratings.bookinfo.mesh]
  ports: [{number: 9080, name: http, protocol: HTTP}]
  resolution: DNS
  endpoints: [{address: ratings.internal.example}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: bookinfo}
spec:
  hosts: [db.example.internal]
  addresses: [%s]
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 10.1.0.1}]
`

// TestPilotAgentDNS runs Istio's pilot-agent as a VM runs it with DNS
// capture (ISTIO_META_DNS_CAPTURE and ISTIO_META_DNS_AUTO_ALLOCATE, as
// `baremeshctl vm bootstrap` writes them) in a network namespace of its
// own (its DNS port, 15053, is fixed), with the VM's hosts file mapping
// istiod.istio-system.svc to baremeshd's TLS port across a veth pair and
// a resolv.conf naming a DNS server of the test's in that namespace. The
// agent's xDS proxy gets the name table (NDS) from baremeshd; its DNS
// server then answers an auto-allocated host with the allocated address,
// an explicit-address host with its address, forwards a name outside the
// mesh to the resolv.conf server, and answers the new address after a
// ServiceEntry's edit (the time from the file write is logged).
//
// No Envoy runs here: the test stands in for it on the agent's XDS
// socket (a grpc-go ADS client with the node the agent generated, asking
// for listeners, which is what makes the agent ask for the table).
//
// The agent speaks to baremeshd as Envoy speaks to it: SotW, then Delta
// (Istio's default for Envoy), each with its own agent and namespace.
func TestPilotAgentDNS(t *testing.T) {
	bins := istioBins(t)
	for i, delta := range []bool{false, true} {
		t.Run(map[bool]string{false: "sotw", true: "delta"}[delta], func(t *testing.T) {
			v := startDNSVM(t, bins, i, delta, "")
			var allocated string
			testkit.EventuallyWithin(t, 30*time.Second, "ratings.bookinfo.mesh with an allocated address in the snapshot", func() bool {
				s := v.d.Pipeline().Current().Service("ratings.bookinfo.mesh", "bookinfo")
				if s == nil || !s.AutoAllocated || len(s.Addresses) == 0 {
					return false
				}
				allocated = s.Addresses[0]
				return true
			})
			start := time.Now()
			testkit.EventuallyWithin(t, 60*time.Second, "the agent answers ratings.bookinfo.mesh with its allocated address", func() bool {
				return slices.Equal(v.ns.lookup(t, "ratings.bookinfo.mesh."), []string{allocated})
			})
			t.Logf("name table in the agent %v after the fake Envoy connected", time.Since(start).Round(time.Millisecond))
			if got := v.ns.lookup(t, "db.example.internal."); !slices.Equal(got, []string{"10.9.0.1"}) {
				t.Fatalf("db.example.internal: %v, want [10.9.0.1]", got)
			}
			if got := v.ns.lookup(t, "outside.example.org."); !slices.Equal(got, []string{"192.0.2.77"}) {
				t.Fatalf("outside.example.org (forwarded upstream): %v, want [192.0.2.77]", got)
			}
			if v.upstream() == 0 {
				t.Fatal("the upstream server saw no query")
			}

			// A ServiceEntry edit: the agent answers the new address.
			var took []time.Duration
			for i, addr := range []string{"10.9.0.2", "10.9.0.3", "10.9.0.4"} {
				tmp := filepath.Join(v.conf, fmt.Sprintf(".services-%d.tmp", i))
				must(t, os.WriteFile(tmp, fmt.Appendf(nil, dnsServices, addr), 0o644))
				written := time.Now()
				must(t, os.Rename(tmp, filepath.Join(v.conf, "services.yaml")))
				testkit.EventuallyWithin(t, 30*time.Second, "the agent answers db.example.internal with "+addr, func() bool {
					return slices.Equal(v.ns.lookup(t, "db.example.internal."), []string{addr})
				})
				took = append(took, time.Since(written))
			}
			t.Logf("ServiceEntry edit to the agent's new answer: %v", took)
			v.agent.stop()
		})
	}
}

// dnsVM is a VM of TestPilotAgentDNS: baremeshd, the agent in its
// namespace, the test standing in for Envoy.
type dnsVM struct {
	d        *daemon.Daemon
	ns       *testNetns
	conf     string // baremeshd's config directory
	agent    *agentProc
	upstream func() int // queries the resolv.conf server saw
}

// startDNSVM sets the VM up (namespace k of the test process; Delta or
// SotW from the fake Envoy; extraConfig for baremesh.yaml) and returns
// once the fake Envoy has its stream.
func startDNSVM(t *testing.T, bins string, k int, delta bool, extraConfig string) *dnsVM {
	t.Helper()
	ns := newNetns(t, k)
	cfgFile, d := testSetupAt(t, ns.hostIP, extraConfig)
	conf := filepath.Join(filepath.Dir(cfgFile), "conf.d")
	// Written aside and renamed in, as an editor does: the daemon already
	// watches conf.d, and a file caught half-written is rejected (empty).
	tmp := filepath.Join(conf, ".services.yaml.tmp")
	must(t, os.WriteFile(tmp, fmt.Appendf(nil, dnsServices, "10.9.0.1"), 0o644))
	must(t, os.Rename(tmp, filepath.Join(conf, "services.yaml")))
	// Auto-allocation is asked for as Istio's VM guide does, in the mesh
	// config's proxyMetadata, which `vm bootstrap` copies to cluster.env.
	must(t, os.WriteFile(filepath.Join(filepath.Dir(cfgFile), "meshconfig.yaml"),
		[]byte("trustDomain: cluster.local\ndefaultConfig:\n  proxyMetadata: {ISTIO_META_DNS_AUTO_ALLOCATE: \"true\"}\n"), 0o644))
	boot, vm, _, env := prepareVM(t, d, cfgFile, time.Hour)
	if env["ISTIO_META_DNS_CAPTURE"] != "false" || env["ISTIO_META_DNS_AUTO_ALLOCATE"] != "true" {
		// prepareVM turns capture off for the agents of the host's network namespace.
		t.Fatalf("cluster.env: DNS_CAPTURE %q (prepareVM's), DNS_AUTO_ALLOCATE %q", env["ISTIO_META_DNS_CAPTURE"], env["ISTIO_META_DNS_AUTO_ALLOCATE"])
	}
	if b, _ := os.ReadFile(filepath.Join(boot, "cluster.env")); !strings.Contains(string(b), "ISTIO_META_DNS_CAPTURE='true'") {
		t.Fatalf("cluster.env has no ISTIO_META_DNS_CAPTURE='true':\n%s", b)
	}
	hosts, err := os.ReadFile(filepath.Join(boot, "hosts"))
	must(t, err)
	// The VM's /etc/hosts with the bootstrap's line, its resolv.conf with
	// the test's upstream server.
	ns.etc(t, "hosts", "127.0.0.1 localhost\n"+string(hosts))
	ns.etc(t, "resolv.conf", "nameserver 127.0.0.1\nsearch bookinfo.svc.cluster.local svc.cluster.local cluster.local\n")
	upstream := ns.upstreamDNS(t, map[string]string{"outside.example.org.": "192.0.2.77"})

	_, tlsPort, _ := net.SplitHostPort(d.TLSAddr())
	env["CA_ADDR"] = "istiod.istio-system.svc:" + tlsPort // as cluster.env has it: the hosts file resolves it
	env["ISTIO_META_DNS_CAPTURE"] = "true"                // as cluster.env has it: this agent has a namespace of its own
	env["INSTANCE_IP"] = ns.nsIP
	env["PROXY_CONFIG"] = `{"statusPort": 15020}`
	agent := startAgentIn(t, bins, vm, env, ns.name)
	_, waitIssued := certzOf(t, d)
	waitIssued(1, "the first certificate", 60*time.Second)

	// Stand in for Envoy on the agent's XDS socket with the agent's node.
	sock := filepath.Join(vm, "etc", "istio", "proxy", "XDS")
	bootFile := filepath.Join(vm, "etc", "istio", "proxy", "grpc-bootstrap.json")
	testkit.EventuallyWithin(t, 30*time.Second, "the agent's XDS socket and node", func() bool {
		_, e1 := os.Stat(sock)
		_, e2 := os.Stat(bootFile)
		return e1 == nil && e2 == nil
	})
	node := agentNode(t, bootFile)
	if node.GetMetadata().GetFields()["DNS_CAPTURE"].GetStringValue() != "true" {
		t.Fatalf("agent's node has no DNS_CAPTURE: %v", node.GetMetadata())
	}
	fakeEnvoy(t, sock, node, delta)
	return &dnsVM{d: d, ns: ns, conf: conf, agent: agent, upstream: upstream}
}

// agentNode reads the node the agent put in its gRPC bootstrap (the
// node Envoy's bootstrap would carry) and makes it Envoy's: no GENERATOR.
func agentNode(t *testing.T, file string) *corev3.Node {
	t.Helper()
	b, err := os.ReadFile(file)
	must(t, err)
	var v struct {
		Node json.RawMessage `json:"node"`
	}
	must(t, json.Unmarshal(b, &v))
	n := &corev3.Node{}
	must(t, protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(v.Node, n))
	delete(n.GetMetadata().GetFields(), "GENERATOR")
	return n
}

// fakeEnvoy opens an ADS stream (SotW or Delta) on the agent's XDS
// socket and asks for listeners, ACKing what comes, until the test ends.
func fakeEnvoy(t *testing.T, sock string, node *corev3.Node, delta bool) {
	t.Helper()
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	const lds = "type.googleapis.com/envoy.config.listener.v3.Listener"
	c := discovery.NewAggregatedDiscoveryServiceClient(cc)
	if delta {
		s, err := c.DeltaAggregatedResources(ctx)
		must(t, err)
		must(t, s.Send(&discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: lds}))
		go func() {
			for {
				r, err := s.Recv()
				if err != nil {
					return
				}
				_ = s.Send(&discovery.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
			}
		}()
		return
	}
	s, err := c.StreamAggregatedResources(ctx)
	must(t, err)
	must(t, s.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: lds}))
	go func() {
		for {
			r, err := s.Recv()
			if err != nil {
				return
			}
			_ = s.Send(&discovery.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()})
		}
	}()
}

// testNetns is a network namespace made by the test, joined to the
// test's by a veth pair (hostIP on the test's side, nsIP on its own).
type testNetns struct {
	name, hostIP, nsIP string
	handle             netns.NsHandle
}

// newNetns makes namespace k of this test process.
func newNetns(t *testing.T, k int) *testNetns {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	id := os.Getpid()%100000*10 + k
	n := &testNetns{name: fmt.Sprintf("bmdns%d", id), hostIP: fmt.Sprintf("10.251.%d.1", id%250), nsIP: fmt.Sprintf("10.251.%d.2", id%250)}
	hostIf, nsIf := fmt.Sprintf("bm%dh", id), fmt.Sprintf("bm%dn", id)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", n.name)
	t.Cleanup(func() {
		_ = exec.Command("ip", "netns", "del", n.name).Run() // takes the veth pair with it
		_ = os.RemoveAll(filepath.Join("/etc/netns", n.name))
	})
	run("link", "add", hostIf, "type", "veth", "peer", "name", nsIf)
	run("link", "set", nsIf, "netns", n.name)
	run("addr", "add", n.hostIP+"/30", "dev", hostIf)
	run("link", "set", hostIf, "up")
	run("-n", n.name, "addr", "add", n.nsIP+"/30", "dev", nsIf)
	run("-n", n.name, "link", "set", nsIf, "up")
	run("-n", n.name, "link", "set", "lo", "up")
	h, err := netns.GetFromName(n.name)
	must(t, err)
	n.handle = h
	t.Cleanup(func() { h.Close() })
	return n
}

// etc writes /etc/netns/NAME/file, which `ip netns exec` mounts over
// /etc/file for what runs in the namespace.
func (n *testNetns) etc(t *testing.T, file, body string) {
	t.Helper()
	dir := filepath.Join("/etc/netns", n.name)
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644))
}

// in runs f on a thread in the namespace: sockets f opens are in it.
func (n *testNetns) in(t *testing.T, f func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	must(t, err)
	defer orig.Close()
	must(t, netns.Set(n.handle))
	defer func() {
		if err := netns.Set(orig); err != nil {
			panic(fmt.Sprintf("cannot return to the test's network namespace: %v", err)) // the thread is unusable
		}
	}()
	f()
}

// lookup asks the agent's DNS server (127.0.0.1:15053 in the namespace)
// for host's A records, sorted; nil on any failure (SERVFAIL before the table
// arrives, NXDOMAIN, a timeout).
func (n *testNetns) lookup(t *testing.T, host string) []string {
	t.Helper()
	var c net.Conn
	n.in(t, func() {
		var err error
		c, err = net.Dial("udp", "127.0.0.1:15053")
		must(t, err)
	})
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	co := &dns.Conn{Conn: c}
	q := new(dns.Msg)
	q.SetQuestion(host, dns.TypeA)
	if err := co.WriteMsg(q); err != nil {
		return nil
	}
	r, err := co.ReadMsg()
	if err != nil || r.Rcode != dns.RcodeSuccess {
		return nil
	}
	var out []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	slices.Sort(out)
	return out
}

// upstreamDNS serves names (FQDN to IPv4) on 127.0.0.1:53 in the
// namespace, NXDOMAIN for the rest; it returns how many queries it saw.
func (n *testNetns) upstreamDNS(t *testing.T, names map[string]string) (queries func() int) {
	t.Helper()
	var pc net.PacketConn
	n.in(t, func() {
		var err error
		pc, err = net.ListenPacket("udp", "127.0.0.1:53")
		must(t, err)
	})
	seen := make(chan struct{}, 1000)
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		seen <- struct{}{}
		r := new(dns.Msg)
		r.SetReply(q)
		name := strings.ToLower(q.Question[0].Name)
		if ip, ok := names[name]; ok && q.Question[0].Qtype == dns.TypeA {
			r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: net.ParseIP(ip)})
		} else if !ok {
			r.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(r)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return func() int { return len(seen) }
}
