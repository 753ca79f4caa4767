package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/gatewayapi"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/sources/kube"
	"github.com/baremesh/baremesh/sources/mcp"
	"github.com/baremesh/baremesh/xdsserver/gen/telemetry"
)

type configzResource struct {
	Kind            string            `json:"kind"`
	APIVersion      string            `json:"apiVersion"`
	Namespace       string            `json:"namespace"`
	Name            string            `json:"name"`
	Labels          map[string]string `json:"labels,omitempty"`
	Annotations     map[string]string `json:"annotations,omitempty"`
	ResourceVersion string            `json:"resourceVersion,omitempty"`
	Source          config.Source     `json:"source"`
	Spec            json.RawMessage   `json:"spec"`
	// Status is the status baremesh computed for a Gateway API object
	// (conditions as the API defines them; core/gatewayapi).
	Status *gatewayapi.Status `json:"status,omitempty"`
}

type configz struct {
	Snapshot  *snapshotInfo     `json:"snapshot,omitempty"`
	Resources []configzResource `json:"resources"`
	// Next, when not 0, is the offset of the next page of resources
	// (?offset=Next with the same filters); Total is how many resources
	// match the filters.
	Next  int `json:"next,omitempty"`
	Total int `json:"total"`
	// Truncated counts, per problem list, the problems a page leaves out
	// (a page shows the first configzPageItems of each; ?all=1 shows
	// every one).
	Truncated map[string]int   `json:"truncated,omitempty"`
	Rejected  []store.Problem  `json:"rejected"`
	Conflicts []store.Conflict `json:"conflicts"`
	// Model lists what the service model could not build as configured
	// (ServiceEntry hosts left without an automatic address).
	Model []store.Problem `json:"model"`
	// Clusters are the Kubernetes clusters, with their connection state.
	Clusters []kube.ClusterStatus `json:"clusters,omitempty"`
	// MCP is the state of each MCP upstream.
	MCP []mcp.Status `json:"mcp,omitempty"`
	// Credentials lists gateway credentials that cannot be served and the
	// Gateway servers left out for it (credentials.go).
	Credentials []credentialProblem `json:"credentials"`
	// Authn lists JWT key sets that could not be fetched and CUSTOM
	// policies whose provider cannot be used (jwks.go).
	Authn authnProblems `json:"authn"`
}

type snapshotInfo struct {
	Version  uint64    `json:"version"`
	Built    time.Time `json:"built"`
	Services int       `json:"services"`
}

// Page bounds of /debug/configz: a page holds at most configzPageItems
// resources and stops after the first resource that takes it past
// configzPageBytes of specs, so an answer is at most that plus one
// resource and the problem lists (issue #30: 100,000 resources made one
// 75 MB answer that took 550 MB to build).
const (
	configzPageItems = 1000
	configzPageBytes = 4 << 20
)

// configz shows the resources in force with their source and file, the
// rejected files with their errors, the conflicts between sources and the
// service model's problems. Filters: kind, namespace, source (the
// source's name or a prefix of its file's path). Resources come a page
// at a time (?offset=N, ?limit=N up to configzPageItems), with at most
// configzPageItems of each problem list; ?all=1 streams every matching
// resource, encoded one at a time as it is written, and every problem.
func (d *Daemon) configz(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	out := configz{Resources: []configzResource{}, Rejected: d.agg.Problems(), Conflicts: d.agg.Conflicts()}
	if out.Rejected == nil {
		out.Rejected = []store.Problem{}
	}
	if out.Conflicts == nil {
		out.Conflicts = []store.Conflict{}
	}
	out.Model = d.registry.Problems()
	// EnvoyFilter patches that could not be applied (skipped; #29).
	out.Model = append(out.Model, d.xds.Builder().EnvoyFilterProblems()...)
	// Telemetry resources naming providers the mesh lacks, or two at one level (#27).
	out.Model = append(out.Model, telemetry.Problems(d.pipeline.Current())...)
	if k := d.kube.Load(); k != nil {
		out.Clusters = k.Status()
	}
	out.Credentials = credentialProblems(d.pipeline.Current(), d.xds.Proxies())
	out.Authn = d.authnProblems()
	var gwStatus map[config.Key]*gatewayapi.Status
	if pc := d.pipeline.Current(); pc != nil {
		out.Snapshot = &snapshotInfo{Version: pc.Version, Built: pc.Built, Services: len(pc.Services())}
		gwStatus = pc.GatewayAPIStatus()
	}
	for _, u := range d.upstreams {
		out.MCP = append(out.MCP, u.Status())
	}

	kind, ns, src := config.Kind(q.Get("kind")), q.Get("namespace"), q.Get("source")
	// The matching resources as views of the store's sorted index, one
	// per kind, shared rather than copied; only a source filter makes a
	// list of its own (of pointers).
	var matched configzMatch
	for _, k := range config.Kinds() {
		if kind != "" && k != kind {
			continue
		}
		view := d.agg.Sorted(k, ns)
		if src != "" {
			var kept []*config.Config
			for _, c := range view {
				if c.Source.Name == src || (c.Source.File != "" && strings.HasPrefix(c.Source.File, src)) {
					kept = append(kept, c)
				}
			}
			view = kept
		}
		if len(view) > 0 {
			matched.parts = append(matched.parts, view)
			matched.total += len(view)
		}
	}
	out.Total = matched.total
	all := q.Get("all") == "1" || q.Get("all") == "true"
	offset, _ := strconv.Atoi(q.Get("offset"))
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil || limit <= 0 || limit > configzPageItems {
		limit = configzPageItems
	}
	offset = min(max(offset, 0), matched.total)
	render := func(c *config.Config) configzResource {
		spec, err := protojson.Marshal(c.Spec)
		if err != nil {
			spec = []byte(`null`)
		}
		return configzResource{
			Kind: string(c.Key().Kind), APIVersion: c.GVK.APIVersion(), Namespace: c.Namespace, Name: c.Name,
			Labels: c.Labels, Annotations: c.Annotations, ResourceVersion: c.ResourceVersion, Source: c.Source, Spec: spec,
			Status: gwStatus[c.Key()],
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if all {
		streamConfigz(w, out, matched, render)
		return
	}
	out.Rejected = pageProblems(&out, "rejected", out.Rejected)
	out.Conflicts = pageProblems(&out, "conflicts", out.Conflicts)
	out.Model = pageProblems(&out, "model", out.Model)
	size, end := 0, offset
	matched.each(offset, func(c *config.Config) bool {
		if end-offset >= limit || (end > offset && size >= configzPageBytes) {
			return false
		}
		res := render(c)
		size += len(res.Spec)
		out.Resources = append(out.Resources, res)
		end++
		return true
	})
	if end < matched.total {
		out.Next = end
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
}

// pageProblems keeps the first configzPageItems of a problem list for a page
// and counts the rest in out.Truncated (100,000 address-less
// ServiceEntries left 35,000 model problems: 11 MB).
func pageProblems[T any](out *configz, name string, list []T) []T {
	if len(list) <= configzPageItems {
		return list
	}
	if out.Truncated == nil {
		out.Truncated = map[string]int{}
	}
	out.Truncated[name] = len(list) - configzPageItems
	return list[:configzPageItems]
}

// configzMatch is the resources a query matches: views of the store's
// sorted index (store.Aggregate.Sorted), shown one after the other.
type configzMatch struct {
	parts [][]*config.Config
	total int
}

// each calls fn for the matched resources from the offset-th on, until
// fn returns false.
func (m configzMatch) each(offset int, fn func(*config.Config) bool) {
	for _, part := range m.parts {
		if offset >= len(part) {
			offset -= len(part)
			continue
		}
		for _, c := range part[offset:] {
			if !fn(c) {
				return
			}
		}
		offset = 0
	}
}

// streamConfigz writes out with every resource of matched, each rendered
// and encoded as it is written: neither the answer nor the list of
// resources is copied whole.
func streamConfigz(w http.ResponseWriter, out configz, matched configzMatch, render func(*config.Config) configzResource) {
	bw := bufio.NewWriterSize(w, 64<<10)
	defer bw.Flush()
	// The fields other than the resources, as one object whose closing
	// brace makes room for them.
	out.Resources = nil
	head, err := json.Marshal(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	head = bytes.Replace(head, []byte(`"resources":null,`), nil, 1)
	_, _ = bw.Write(head[:len(head)-1])
	_, _ = bw.WriteString(`,"resources":[`)
	enc := json.NewEncoder(bw)
	first := true
	matched.each(0, func(c *config.Config) bool {
		if !first {
			_ = bw.WriteByte(',')
		}
		first = false
		return enc.Encode(render(c)) == nil // else the client went away
	})
	_, _ = bw.WriteString("]}\n")
}
