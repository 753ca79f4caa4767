package parity

import (
	"context"
	"fmt"
	"sort"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// The four types the harness follows, by their short names in reports.
const (
	CDS = "cds"
	LDS = "lds"
	RDS = "rds"
	EDS = "eds"
)

// typeURLs come from the one table of xDS types.
var typeURLs = map[string]string{
	CDS: xdstype.Cluster.URL,
	LDS: xdstype.Listener.URL,
	RDS: xdstype.Route.URL,
	EDS: xdstype.Endpoint.URL,
}

// Types lists the short type names in the order reports use.
var Types = []string{LDS, RDS, CDS, EDS}

// Resources is what one proxy received from one server: short type →
// resource name → resource.
type Resources map[string]map[string]proto.Message

// Count is the number of resources over all types.
func (r Resources) Count() int {
	n := 0
	for _, m := range r {
		n += len(m)
	}
	return n
}

// CollectOptions says how long a collection waits.
type CollectOptions struct {
	// Quiet is how long no response may arrive (and no request be due)
	// before the proxy's config counts as settled.
	Quiet time.Duration
	// Pending is how long no response may arrive while a subscription is
	// still unanswered before the collection gives up waiting for it (a
	// server that never answers some names: they show as missing
	// resources); 5×Quiet when zero. A large scenario on a busy machine
	// can take longer than that to generate.
	Pending time.Duration
	// Timeout bounds the whole collection.
	Timeout time.Duration
}

// typeState is one type's subscription on the stream.
type typeState struct {
	wildcard  bool
	names     []string // sorted; the subscription when not wildcard
	version   string
	nonce     string
	responses int
	// pending: a changed subscription not answered yet.
	pending bool
	res     map[string]proto.Message
}

// Collect connects to the plaintext ADS server at addr as p, subscribes as
// Envoy does (CDS and LDS wildcard, then RDS names from the listeners and
// EDS names from the clusters) or, for a proxyless gRPC proxy, as gRPC does
// (LDS by name, then RDS, CDS and EDS names from what arrives), ACKs every
// response and returns what it holds once nothing has arrived for
// o.Quiet. It fails with the server and proxy named if the stream breaks
// or nothing settles within o.Timeout.
func Collect(ctx context.Context, addr string, p *Proxy, o CollectOptions) (Resources, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		return nil, fmt.Errorf("proxy %s: dial %s: %w", p.Name, addr, err)
	}
	defer cc.Close()
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, fmt.Errorf("proxy %s: ADS stream to %s: %w", p.Name, addr, err)
	}
	node := p.Node()
	st := map[string]*typeState{}
	send := func(typ string) error {
		s := st[typ]
		req := &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: typeURLs[typ], VersionInfo: s.version, ResponseNonce: s.nonce}
		if !s.wildcard {
			req.ResourceNames = s.names
		}
		return stream.Send(req)
	}
	subscribe := func(typ string, names []string, wildcard bool) error {
		sort.Strings(names)
		s := st[typ]
		if s == nil {
			if !wildcard && len(names) == 0 {
				return nil
			}
			s = &typeState{res: map[string]proto.Message{}}
			st[typ] = s
		} else if s.wildcard == wildcard && equalStrings(s.names, names) {
			return nil
		}
		s.wildcard, s.names, s.pending = wildcard, names, true
		return send(typ)
	}
	if p.Proxyless {
		err = subscribe(LDS, append([]string(nil), p.Listeners...), false)
	} else {
		if err = subscribe(CDS, nil, true); err == nil {
			err = subscribe(LDS, nil, true)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("proxy %s: subscribe at %s: %w", p.Name, addr, err)
	}

	type recv struct {
		resp *discoveryv3.DiscoveryResponse
		err  error
	}
	ch := make(chan recv, 16)
	go func() {
		for {
			r, err := stream.Recv()
			select {
			case ch <- recv{r, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	// Settled: nothing arrived for o.Quiet and every changed subscription
	// was answered, or nothing arrived for o.Pending.
	if o.Pending == 0 {
		o.Pending = 5 * o.Quiet
	}
	timer := time.NewTimer(o.Quiet)
	defer timer.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("proxy %s at %s: no settled config within %v", p.Name, addr, o.Timeout)
		case <-timer.C:
			if !anyPending(st) || time.Since(last) >= o.Pending {
				return collected(st), nil
			}
			timer.Reset(o.Quiet)
		case r := <-ch:
			if r.err != nil {
				return nil, fmt.Errorf("proxy %s at %s: stream: %w", p.Name, addr, r.err)
			}
			typ := shortType(r.resp.GetTypeUrl())
			s := st[typ]
			if s == nil {
				continue // a type we did not ask for
			}
			last = time.Now()
			s.pending = false
			if err := s.apply(typ, r.resp); err != nil {
				return nil, fmt.Errorf("proxy %s at %s: %w", p.Name, addr, err)
			}
			if err := send(typ); err != nil { // the ACK
				return nil, fmt.Errorf("proxy %s at %s: ACK: %w", p.Name, addr, err)
			}
			if err := follow(st, p.Proxyless, subscribe); err != nil {
				return nil, fmt.Errorf("proxy %s at %s: subscribe: %w", p.Name, addr, err)
			}
			timer.Reset(o.Quiet)
		}
	}
}

// apply takes a response into the state: root types (LDS, CDS) and every
// response of a named subscription replace the resources the response names;
// a wildcard response replaces everything, and names no longer subscribed
// are dropped.
func (s *typeState) apply(typ string, resp *discoveryv3.DiscoveryResponse) error {
	s.version, s.nonce = resp.GetVersionInfo(), resp.GetNonce()
	s.responses++
	got := map[string]proto.Message{}
	for _, a := range resp.GetResources() {
		m, err := anypb.UnmarshalNew(a, proto.UnmarshalOptions{})
		if err != nil {
			return fmt.Errorf("%s response: decode %s: %w", typ, a.GetTypeUrl(), err)
		}
		got[resourceName(m)] = m
	}
	if s.wildcard || typ == LDS || typ == CDS {
		s.res = got
	} else {
		for k, v := range got {
			s.res[k] = v
		}
	}
	if !s.wildcard {
		want := map[string]bool{}
		for _, n := range s.names {
			want[n] = true
		}
		for k := range s.res {
			if !want[k] {
				delete(s.res, k)
			}
		}
	}
	return nil
}

// GetRes is the held resources; nil-safe.
func (s *typeState) GetRes() map[string]proto.Message {
	if s == nil {
		return nil
	}
	return s.res
}

// follow subscribes to what the held resources point at, as the client
// would.
func follow(st map[string]*typeState, proxyless bool, subscribe func(string, []string, bool) error) error {
	var routes, clusters, eds []string
	if s := st[LDS]; s != nil {
		for _, m := range s.res {
			routes = append(routes, routeNames(m.(*listenerv3.Listener))...)
		}
	}
	if proxyless {
		if s := st[RDS]; s != nil {
			for _, m := range s.res {
				clusters = append(clusters, routeClusters(m.(*routev3.RouteConfiguration))...)
			}
		}
		for _, m := range st[LDS].GetRes() {
			clusters = append(clusters, inlineRouteClusters(m.(*listenerv3.Listener))...)
		}
		if err := subscribe(CDS, dedup(clusters), false); err != nil {
			return err
		}
	}
	if s := st[CDS]; s != nil {
		for _, m := range s.res {
			c := m.(*clusterv3.Cluster)
			if c.GetType() == clusterv3.Cluster_EDS {
				n := c.GetEdsClusterConfig().GetServiceName()
				if n == "" {
					n = c.GetName()
				}
				eds = append(eds, n)
			}
		}
	}
	if err := subscribe(RDS, dedup(routes), false); err != nil {
		return err
	}
	return subscribe(EDS, dedup(eds), false)
}

func anyPending(st map[string]*typeState) bool {
	for _, s := range st {
		if s.pending {
			return true
		}
	}
	return false
}

func collected(st map[string]*typeState) Resources {
	out := Resources{}
	for typ, s := range st {
		out[typ] = s.res
	}
	return out
}

func shortType(url string) string {
	for k, v := range typeURLs {
		if v == url {
			return k
		}
	}
	return url
}

// resourceName is the xDS name of a resource of the four types.
func resourceName(m proto.Message) string {
	if n, ok := m.(interface{ GetName() string }); ok {
		return n.GetName()
	}
	if n, ok := m.(interface{ GetClusterName() string }); ok {
		return n.GetClusterName()
	}
	return ""
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func dedup(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// nodeLocality is kept here so proxy.go stays declarative.
func nodeLocality(region, zone string) *corev3.Locality {
	if region == "" && zone == "" {
		return nil
	}
	return &corev3.Locality{Region: region, Zone: zone}
}
