package load

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// Type is one of the four xDS resource types a sidecar subscribes to.
type Type int

// The types, in the order Envoy needs them.
const (
	Cluster Type = iota
	Endpoint
	Listener
	Route
	numTypes
)

// Types lists every Type.
var Types = [numTypes]Type{Cluster, Endpoint, Listener, Route}

var typeURLs = [numTypes]string{xdstype.Cluster.URL, xdstype.Endpoint.URL, xdstype.Listener.URL, xdstype.Route.URL}

const hcmTypeURL = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"

// URL is the type's xDS type URL.
func (t Type) URL() string { return typeURLs[t] }

func (t Type) String() string { return [numTypes]string{"cds", "eds", "lds", "rds"}[t] }

// wildcard reports whether Envoy subscribes to the type with a wildcard.
func (t Type) wildcard() bool { return t == Cluster || t == Listener }

func typeOf(url string) (Type, bool) {
	for i, u := range typeURLs {
		if u == url {
			return Type(i), true
		}
	}
	return 0, false
}

var seed = maphash.MakeSeed()

// Resource is one decoded resource. Proxies that receive the same bytes
// share one Resource, so 2,000 proxies cost one decode and one copy; it
// must not be altered.
type Resource struct {
	Name string
	Msg  proto.Message
	Size int
	hash uint64
	// deps are the EDS names of an EDS cluster, or the RDS names of a
	// listener's HttpConnectionManagers.
	deps []string
}

type resKey struct {
	t    Type
	hash uint64
	size int
}

// entry is a resource as one proxy holds it, with its Delta version.
type entry struct {
	res     *Resource
	version string
}

func (e entry) hash(name string) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	h.WriteString(name)
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], e.res.hash)
	h.Write(b[:])
	h.WriteString(e.version)
	return h.Sum64()
}

func decode(t Type, b []byte) (*Resource, error) {
	r := &Resource{}
	switch t {
	case Cluster:
		c := &clusterv3.Cluster{}
		if err := proto.Unmarshal(b, c); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		r.Name, r.Msg = c.GetName(), c
		if c.GetType() == clusterv3.Cluster_EDS {
			n := c.GetEdsClusterConfig().GetServiceName()
			if n == "" {
				n = c.GetName()
			}
			r.deps = []string{n}
		}
	case Endpoint:
		c := &endpointv3.ClusterLoadAssignment{}
		if err := proto.Unmarshal(b, c); err != nil {
			return nil, fmt.Errorf("cluster load assignment: %w", err)
		}
		r.Name, r.Msg = c.GetClusterName(), c
	case Listener:
		l := &listenerv3.Listener{}
		if err := proto.Unmarshal(b, l); err != nil {
			return nil, fmt.Errorf("listener: %w", err)
		}
		r.Name, r.Msg = l.GetName(), l
		deps, err := routeNames(l)
		if err != nil {
			return nil, fmt.Errorf("listener %s: %w", l.GetName(), err)
		}
		r.deps = deps
	case Route:
		rc := &routev3.RouteConfiguration{}
		if err := proto.Unmarshal(b, rc); err != nil {
			return nil, fmt.Errorf("route configuration: %w", err)
		}
		r.Name, r.Msg = rc.GetName(), rc
	}
	if r.Name == "" {
		return nil, fmt.Errorf("%s resource without a name", t)
	}
	return r, nil
}

// routeNames finds the RDS route config names of the HttpConnectionManagers
// in l's filter chains.
func routeNames(l *listenerv3.Listener) ([]string, error) {
	chains := slices.Clone(l.GetFilterChains())
	if d := l.GetDefaultFilterChain(); d != nil {
		chains = append(chains, d)
	}
	var anys []*anypb.Any
	for _, fc := range chains {
		for _, f := range fc.GetFilters() {
			anys = append(anys, f.GetTypedConfig())
		}
	}
	if a := l.GetApiListener().GetApiListener(); a != nil {
		anys = append(anys, a)
	}
	var out []string
	for _, a := range anys {
		if a.GetTypeUrl() != hcmTypeURL {
			continue
		}
		h := &hcmv3.HttpConnectionManager{}
		if err := proto.Unmarshal(a.GetValue(), h); err != nil {
			return nil, fmt.Errorf("http connection manager: %w", err)
		}
		if n := h.GetRds().GetRouteConfigName(); n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}
