package ads

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"golang.org/x/tools/txtar"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// Script tests of the ADS state machine (testdata/script/*.txtar): each
// archive has a "script" of steps, one a line, and "want", the transcript
// the steps produce: every step echoed ("> step") and what it printed.
// Run with -update to rewrite "want" from what the server does now.
//
// The server serves two stand-in types, lds (whole, wildcard by default)
// and eds (named, partial in SotW), whose resources are the subscribed
// names (or, for a wildcard, the names "gen all=" set) carrying the port
// "gen port=" set.
//
// Steps (S names a stream):
//
//	open S [delta] [as=T]      open a stream (Delta with "delta"); its node is S's own, or T's
//	send S [type=lds|eds] ...  send a request; SotW: names=a,b, ack (version and nonce of the
//	                           last response of the type on S), nack=MESSAGE, nonce=N, version=V;
//	                           Delta: sub=a,b unsub=c, ack, nack=MESSAGE, nonce=N,
//	                           initial=a,b (the versions last received for those names)
//	recv S                     print the next response on S (fails after 10 s)
//	gen port=N | all=a,b       change what the stand-in generators return
//	push                       a full push
//	wait S [type=..] k=v ...   poll /debug/syncz until S's type shows every k=v
//	                           (requests, acks, nacks, names, resources, nack=MESSAGE)
//	close S                    end the stream and wait for the server to drop it
//
// Nothing a step does not print was sent: a response sent unexpectedly
// shows as the next "recv" printing something else than the transcript.

var update = flag.Bool("update", false, "rewrite the want sections of testdata/script")

func TestScripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/script/*.txtar")
	if len(files) == 0 {
		t.Fatal("no scripts in testdata/script")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txtar"), func(t *testing.T) { runScript(t, f) })
	}
}

type scriptEnv struct {
	t       *testing.T
	srv     *Server
	client  discovery.AggregatedDiscoveryServiceClient
	port    atomic.Uint32
	all     atomic.Pointer[[]string]
	streams map[string]*scriptStream
	// versions are the Delta versions last received, by resource name.
	versions map[string]string
	out      strings.Builder
}

type scriptStream struct {
	name, node string
	delta      bool
	cancel     context.CancelFunc
	sotw       *stream
	dst        *dstream
	sentNode   bool
	// last response of each type: version and nonce.
	lastVer, lastNonce map[string]string
}

var scriptTypes = map[string]*xdstype.Type{"lds": xdstype.Listener, "eds": xdstype.Endpoint}

func runScript(t *testing.T, file string) {
	ar, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var script, want []byte
	for _, f := range ar.Files {
		switch f.Name {
		case "script":
			script = f.Data
		case "want":
			want = f.Data
		}
	}
	e := &scriptEnv{t: t, streams: map[string]*scriptStream{}, versions: map[string]string{}}
	e.port.Store(8080)
	snaps := &fixedSnaps{}
	snaps.pc.Store(&push.PushContext{Version: 1})
	standIn := func(mk func(name string, port uint32) gen.Resource) gen.Generator {
		return func(in gen.Input) ([]gen.Resource, error) {
			names := in.Names
			if names == nil && e.all.Load() != nil {
				names = *e.all.Load()
			}
			var out []gen.Resource
			for _, n := range names {
				out = append(out, mk(n, e.port.Load()))
			}
			return out, nil
		}
	}
	// The stand-ins read e.port, an input outside any cache key: no caches.
	e.srv = New(snaps, Options{NoCache: true, Types: []*xdstype.Type{
		xdstype.Listener.With(standIn(func(n string, port uint32) gen.Resource {
			return gen.Resource{Name: n, Resource: &listenerv3.Listener{Name: n, Address: socket(port)}}
		})),
		xdstype.Endpoint.With(standIn(func(n string, port uint32) gen.Resource {
			return gen.Resource{Name: n, Resource: &endpointv3.ClusterLoadAssignment{ClusterName: n, Endpoints: []*endpointv3.LocalityLbEndpoints{{
				LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: socket(port)}}}}}}}}
		})),
	}})
	e.client = serveForTest(t, e.srv)
	for i, line := range strings.Split(string(script), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fmt.Fprintf(&e.out, "> %s\n", line)
		if err := e.step(strings.Fields(line)); err != nil {
			t.Fatalf("%s:%d: %s: %v", file, i+1, line, err)
		}
	}
	for _, s := range e.streams {
		s.cancel()
	}
	got := e.out.String()
	if *update {
		for i := range ar.Files {
			if ar.Files[i].Name == "want" {
				ar.Files[i].Data = []byte(got)
			}
		}
		if want == nil {
			ar.Files = append(ar.Files, txtar.File{Name: "want", Data: []byte(got)})
		}
		if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != string(want) {
		t.Errorf("%s: transcript differs (-update rewrites it)\n--- got\n%s--- want\n%s", file, got, want)
	}
}

func socket(port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: "10.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}
}

// args splits k=v arguments; a bare word maps to "".
func args(fields []string) map[string]string {
	m := map[string]string{}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		m[k] = v
	}
	return m
}

func list(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func (e *scriptEnv) stream(name string) (*scriptStream, error) {
	s := e.streams[name]
	if s == nil {
		return nil, fmt.Errorf("no stream %q", name)
	}
	return s, nil
}

func (e *scriptEnv) step(f []string) error {
	a := args(f[1:])
	typ := scriptTypes["lds"]
	if a["type"] != "" {
		if typ = scriptTypes[a["type"]]; typ == nil {
			return fmt.Errorf("unknown type %q", a["type"])
		}
	}
	switch f[0] {
	case "open":
		if len(f) < 2 {
			return fmt.Errorf("open needs a stream name")
		}
		node := "sidecar~10.0.0.1~" + f[1] + ".ns~ns.svc.cluster.local"
		if as := a["as"]; as != "" {
			node = "sidecar~10.0.0.1~" + as + ".ns~ns.svc.cluster.local"
		}
		if old := e.streams[f[1]]; old != nil {
			old.cancel()
		}
		ctx, cancel := context.WithCancel(context.Background())
		s := &scriptStream{name: f[1], node: node, cancel: cancel, lastVer: map[string]string{}, lastNonce: map[string]string{}}
		if _, s.delta = a["delta"]; s.delta {
			st, err := e.client.DeltaAggregatedResources(ctx)
			if err != nil {
				return err
			}
			s.dst = &dstream{t: e.t, st: st, rx: pump(st.Recv)}
		} else {
			st, err := e.client.StreamAggregatedResources(ctx)
			if err != nil {
				return err
			}
			s.sotw = &stream{t: e.t, st: st, rx: pump(st.Recv)}
		}
		e.streams[f[1]] = s
	case "send":
		s, err := e.stream(f[1])
		if err != nil {
			return err
		}
		var node *corev3.Node
		if !s.sentNode {
			node, s.sentNode = &corev3.Node{Id: s.node}, true
		}
		nonce, version := a["nonce"], a["version"]
		if _, ack := a["ack"]; ack || a["nack"] != "" {
			nonce, version = s.lastNonce[typ.URL], s.lastVer[typ.URL]
		}
		var detail *statuspb.Status
		if a["nack"] != "" {
			detail = &statuspb.Status{Code: 3, Message: a["nack"]}
		}
		if s.delta {
			r := &discovery.DeltaDiscoveryRequest{Node: node, TypeUrl: typ.URL, ResponseNonce: nonce, ErrorDetail: detail,
				ResourceNamesSubscribe: list(a["sub"]), ResourceNamesUnsubscribe: list(a["unsub"])}
			for _, n := range list(a["initial"]) {
				if r.InitialResourceVersions == nil {
					r.InitialResourceVersions = map[string]string{}
				}
				r.InitialResourceVersions[n] = e.versions[n]
			}
			return s.dst.st.Send(r)
		}
		return s.sotw.st.Send(&discovery.DiscoveryRequest{Node: node, TypeUrl: typ.URL, VersionInfo: version, ResponseNonce: nonce,
			ResourceNames: list(a["names"]), ErrorDetail: detail})
	case "recv":
		s, err := e.stream(f[1])
		if err != nil {
			return err
		}
		if s.delta {
			r := s.dst.recv()
			t := short(r.GetTypeUrl())
			s.lastNonce[r.GetTypeUrl()] = r.GetNonce()
			var res []string
			for _, x := range r.GetResources() {
				e.versions[x.GetName()] = x.GetVersion()
				res = append(res, content(x.GetResource())+"@"+x.GetVersion()[:6])
			}
			slices.Sort(res)
			fmt.Fprintf(&e.out, "%s %s nonce=%s version=%s resources=[%s] removed=[%s]\n", s.name, t, r.GetNonce(), r.GetSystemVersionInfo(),
				strings.Join(res, " "), strings.Join(r.GetRemovedResources(), " "))
			return nil
		}
		r := s.sotw.recv()
		s.lastNonce[r.GetTypeUrl()], s.lastVer[r.GetTypeUrl()] = r.GetNonce(), r.GetVersionInfo()
		var res []string
		for _, x := range r.GetResources() {
			res = append(res, content(x))
		}
		fmt.Fprintf(&e.out, "%s %s nonce=%s version=%s resources=[%s]\n", s.name, short(r.GetTypeUrl()), r.GetNonce(), r.GetVersionInfo(), strings.Join(res, " "))
	case "gen":
		if p, ok := a["port"]; ok {
			n, err := strconv.Atoi(p)
			if err != nil {
				return err
			}
			e.port.Store(uint32(n))
		}
		if all, ok := a["all"]; ok {
			l := list(all)
			e.all.Store(&l)
		}
	case "push":
		e.srv.OnPush(nil, &push.Request{Full: true})
	case "wait":
		s, err := e.stream(f[1])
		if err != nil {
			return err
		}
		delete(a, "type")
		delete(a, f[1])
		testkit.Eventually(e.t, strings.Join(f, " "), func() bool {
			for _, ps := range e.srv.Syncz() {
				if ps.ID != s.node {
					continue
				}
				for _, ts := range ps.Types {
					if ts.Type == typ.Short && syncMatches(ts, a) {
						return true
					}
				}
			}
			return false
		})
	case "close":
		s, err := e.stream(f[1])
		if err != nil {
			return err
		}
		s.cancel()
		delete(e.streams, f[1])
		testkit.Eventually(e.t, "server drops "+f[1], func() bool {
			for _, ps := range e.srv.Syncz() {
				if ps.ID == s.node {
					return false
				}
			}
			return true
		})
	default:
		return fmt.Errorf("unknown step %q", f[0])
	}
	return nil
}

func syncMatches(ts SyncStatus, want map[string]string) bool {
	for k, v := range want {
		var got string
		switch k {
		case "requests":
			got = strconv.Itoa(ts.Requests)
		case "acks":
			got = strconv.Itoa(ts.Acks)
		case "nacks":
			got = strconv.Itoa(ts.Nacks)
		case "names":
			got = strconv.Itoa(ts.Names)
		case "resources":
			got = strconv.Itoa(ts.Resources)
		case "nack":
			if ts.LastNack != nil {
				got = ts.LastNack.Message
			}
		default:
			return false
		}
		if got != v {
			return false
		}
	}
	return true
}

func short(typeURL string) string {
	for s, t := range scriptTypes {
		if t.URL == typeURL {
			return s
		}
	}
	return typeURL
}

// content prints a stand-in resource as NAME:PORT.
func content(x *anypb.Any) string {
	var l listenerv3.Listener
	if x.UnmarshalTo(&l) == nil {
		return l.GetName() + ":" + strconv.Itoa(int(l.GetAddress().GetSocketAddress().GetPortValue()))
	}
	var cla endpointv3.ClusterLoadAssignment
	if x.UnmarshalTo(&cla) == nil {
		port := cla.GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetPortValue()
		return cla.GetClusterName() + ":" + strconv.Itoa(int(port))
	}
	return "?" + x.GetTypeUrl()
}
