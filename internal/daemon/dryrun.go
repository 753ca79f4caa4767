package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/sources/file"
	"github.com/baremesh/baremesh/xdsserver/dryrun"
)

// DiffRequest is POST /debug/diff's body: the config files that would
// replace every file source's resources (baremeshctl diff DIR sends a
// directory's files).
type DiffRequest struct {
	Files []DiffFile `json:"files"`
}

// DiffFile is one file of a DiffRequest.
type DiffFile struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// diffHandler serves POST /debug/diff[?proxy=ID]: what every connected
// proxy (or one) would receive differently if the files replaced the
// config of the file sources. Resources from other sources (Kubernetes,
// MCP, auto-registration) stay. Both sides are built from scratch with the
// same service model and generators as a push, so the diff shows only what
// the files change; nothing is pushed and no state changes. Files that do
// not parse answer 422 with every problem, as baremeshctl validate prints
// them.
func (d *Daemon) diffHandler(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST a DiffRequest (baremeshctl diff DIR)", http.StatusMethodNotAllowed)
		return
	}
	var req DiffRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<20)).Decode(&req); err != nil {
		http.Error(w, "bad request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	cur := d.pipeline.Current()
	if cur == nil {
		http.Error(w, "not ready: first snapshot not built yet", http.StatusServiceUnavailable)
		return
	}
	var before, kept []config.Config
	for _, k := range config.Kinds() {
		for _, c := range d.agg.List(k, "") {
			before = append(before, c)
			if src, _ := d.agg.SourceOf(c.Key()); !strings.HasPrefix(src, "file:") {
				kept = append(kept, c)
			}
		}
	}
	var problems []string
	seen := map[config.Key]config.Source{}
	after := kept
	for _, f := range req.Files {
		cfgs, errs := file.Parse([]byte(f.Content), f.Path, "diff")
		for _, e := range errs {
			problems = append(problems, e.Error())
		}
		for _, c := range cfgs {
			if prev, dup := seen[c.Key()]; dup {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: duplicate: already defined in %s:%d", f.Path, c.Source.Line, c.Key(), prev.File, prev.Line))
				continue
			}
			seen[c.Key()] = c.Source
			after = append(after, c)
		}
	}
	if len(problems) > 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		_ = json.NewEncoder(w).Encode(map[string][]string{"problems": problems})
		return
	}
	rep := dryrun.Run(snapshotOf(before, cur.Mesh), snapshotOf(after, cur.Mesh), d.xds.Subscribers(r.URL.Query().Get("proxy")))
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(rep)
}

// snapshotOf builds a snapshot of cfgs alone, through the same store
// events, service model and address allocation as the pipeline.
func snapshotOf(cfgs []config.Config, mesh *meshv1alpha1.MeshConfig) *push.PushContext {
	mem := store.NewMemory()
	reg := model.NewRegistry(model.NewAllocator())
	mem.Subscribe(func(evs []store.Event) { reg.Apply(model.Update{Events: evs}) })
	mem.Apply(cfgs, nil)
	return push.Build(nil, push.Inputs{Store: mem, Registry: reg, Mesh: mesh}, nil, time.Now())
}
