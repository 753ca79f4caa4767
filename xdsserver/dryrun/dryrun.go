// Package dryrun computes what connected proxies would receive if the
// config changed, without pushing anything: it regenerates every
// subscribed type of every connection with the daemon's own generators
// (the xdsserver/xdstype table) from two snapshots and compares them per
// resource. It reads connections through ads.Server.Subscribers and
// holds no state; it must not be imported by ads, build or the
// generators.
package dryrun

import (
	"encoding/json"
	"fmt"
	"sort"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/ads"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// Report is the dry run's answer: one entry per connection.
type Report struct {
	Proxies []ProxyDiff `json:"proxies"`
}

// ProxyDiff is what one connection would receive differently; Types lists
// only the types that change.
type ProxyDiff struct {
	ID    string     `json:"id"`
	Conn  string     `json:"connection"`
	Types []TypeDiff `json:"types"`
}

// TypeDiff is one xDS type's changes for one proxy.
type TypeDiff struct {
	Type    string          `json:"type"`
	Added   []AddedResource `json:"added,omitempty"`
	Removed []string        `json:"removed,omitempty"`
	Changed []Changed       `json:"changed,omitempty"`
	Error   string          `json:"error,omitempty"` // generation failed with the new config
}

// AddedResource is a resource the proxy would newly receive, as protobuf JSON.
type AddedResource struct {
	Name     string          `json:"name"`
	Resource json.RawMessage `json:"resource"`
}

// Changed is a resource whose content would change.
type Changed struct {
	Name   string        `json:"name"`
	Fields []FieldChange `json:"fields"`
}

// Run regenerates every subscription of subs from before and after and
// returns the differences. The resource names an Envoy would subscribe to
// for EDS and RDS follow each side's CDS and LDS (a new cluster brings its
// endpoints); proxyless gRPC names are kept as subscribed.
func Run(before, after *push.PushContext, subs []ads.Subscriber) Report {
	rep := Report{Proxies: []ProxyDiff{}}
	for _, s := range subs {
		pd := ProxyDiff{ID: s.Proxy.ID, Conn: s.Conn, Types: []TypeDiff{}}
		old, nu := side{pc: before, p: s.Proxy}, side{pc: after, p: s.Proxy}
		for _, sub := range s.Subs {
			td := TypeDiff{Type: sub.Type.Short}
			a, errA := old.generate(sub)
			b, errB := nu.generate(sub)
			switch {
			case errB != nil:
				td.Error = errB.Error()
			case errA != nil:
				td.Error = "the current config fails to generate: " + errA.Error()
			default:
				compare(&td, a, b)
			}
			if td.Error != "" || len(td.Added)+len(td.Removed)+len(td.Changed) > 0 {
				pd.Types = append(pd.Types, td)
			}
		}
		rep.Proxies = append(rep.Proxies, pd)
	}
	return rep
}

// side generates one snapshot's resources for one proxy, remembering the
// EDS and RDS names its CDS and LDS reference.
type side struct {
	pc          *push.PushContext
	p           *model.Proxy
	eds, routes []string
	sawCDS      bool
	sawLDS      bool
}

func (s *side) generate(sub ads.Subscription) (map[string]proto.Message, error) {
	names := sub.Names
	if !s.p.Proxyless {
		switch {
		case sub.Type.Endpoints && s.sawCDS:
			names = s.eds
		case sub.Type == xdstype.Route && s.sawLDS:
			names = s.routes
		}
	}
	if names != nil && len(names) == 0 {
		return map[string]proto.Message{}, nil // a named subscription with nothing to name
	}
	res, err := sub.Type.Generate(gen.Input{Push: s.pc, Proxy: s.p, Names: names})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sub.Type.Short, err)
	}
	out := make(map[string]proto.Message, len(res))
	for _, r := range res {
		out[r.Name] = r.Resource
		switch m := r.Resource.(type) {
		case *clusterv3.Cluster:
			if m.GetType() == clusterv3.Cluster_EDS {
				n := m.GetEdsClusterConfig().GetServiceName()
				if n == "" {
					n = m.GetName()
				}
				s.eds = append(s.eds, n)
			}
		case *listenerv3.Listener:
			for _, fc := range append(m.GetFilterChains(), m.GetDefaultFilterChain()) {
				for _, f := range fc.GetFilters() {
					var h hcmv3.HttpConnectionManager
					if f.GetTypedConfig().UnmarshalTo(&h) == nil && h.GetRds() != nil {
						s.routes = append(s.routes, h.GetRds().GetRouteConfigName())
					}
				}
			}
		}
	}
	switch sub.Type {
	case xdstype.Cluster:
		s.sawCDS, s.eds = true, dedupe(s.eds)
	case xdstype.Listener:
		s.sawLDS, s.routes = true, dedupe(s.routes)
	}
	return out, nil
}

func dedupe(l []string) []string {
	sort.Strings(l)
	out := l[:0]
	for i, s := range l {
		if i == 0 || s != l[i-1] {
			out = append(out, s)
		}
	}
	if out == nil {
		return []string{}
	}
	return out
}

func compare(td *TypeDiff, a, b map[string]proto.Message) {
	var names []string
	for n := range a {
		names = append(names, n)
	}
	for n := range b {
		if _, ok := a[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		oa, inA := a[n]
		nb, inB := b[n]
		switch {
		case !inA:
			j, _ := protojson.Marshal(nb)
			td.Added = append(td.Added, AddedResource{Name: n, Resource: j})
		case !inB:
			td.Removed = append(td.Removed, n)
		case !proto.Equal(oa, nb):
			fc, err := Fields(oa, nb)
			if err != nil {
				fc = []FieldChange{{Path: "(resource)", Old: "?", New: err.Error()}}
			}
			if len(fc) > 0 {
				td.Changed = append(td.Changed, Changed{Name: n, Fields: fc})
			}
		}
	}
}
