// Package kube is the optional Kubernetes source: one or more clusters,
// each from a kubeconfig file in a watched directory (the VM-native form
// of istiod's remote secrets). Per cluster, client-go shared informers
// follow Services, EndpointSlices, Pods, Nodes and Namespaces, and a
// dynamic informer each Istio kind whose CRD the cluster serves (CRDs
// installed later are picked up; missing ones are not an error).
//
// Kubernetes objects are converted here into core types: Services with
// their EndpointSlices become model.KubeService values and Pods
// model.WorkloadInstances, handed to Options.Model (push.Pipeline.OnKube,
// the one way into the service model); Istio resources become
// config.Configs delivered to a store.Sink, the same contract sources/file
// keeps.
//
// The cluster ID is the kubeconfig file's name without its extension
// (clusters/east.yaml is cluster "east"); the file's current context
// chooses the server and credentials.
//
// It imports core and sources/dirwatch (the watched-directory primitive,
// not a source); never xdsserver or another source.
package kube

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/sources/dirwatch"
)

// Options configure a Source. Zero values take the defaults.
type Options struct {
	// Dir holds one kubeconfig file per cluster.
	Dir string
	// Name names the source in Configs, problems and logs; default "kube".
	Name string
	// Domain is the cluster domain of Service hostnames; default
	// "cluster.local".
	Domain string
	// DiscoverySelectors filter namespaces as mesh config's
	// discoverySelectors do; none selects every namespace.
	DiscoverySelectors []*meshv1alpha1.LabelSelector
	// Model receives the service model's input (required). It is called
	// from several goroutines, one batch at a time per cluster.
	Model func(model.KubeUpdate)
	// SyncTimeout bounds how long Synced waits for the clusters present
	// at start (an unreachable one must not hold the first snapshot
	// forever); default 30 s.
	SyncTimeout time.Duration
	// Rescan is how often the directory is re-read besides the watch's
	// events; default 2 s.
	Rescan time.Duration
	// CRDPoll is how often a cluster is asked which Istio kinds it
	// serves; default 10 s.
	CRDPoll time.Duration
	// Probe is how often a cluster's API server is checked; default 5 s.
	Probe   time.Duration
	Logger  *slog.Logger
	Metrics *Metrics
}

func (o *Options) setDefaults() {
	if o.Name == "" {
		o.Name = "kube"
	}
	if o.Domain == "" {
		o.Domain = "cluster.local"
	}
	if o.SyncTimeout <= 0 {
		o.SyncTimeout = 30 * time.Second
	}
	if o.Rescan <= 0 {
		o.Rescan = 2 * time.Second
	}
	if o.CRDPoll <= 0 {
		o.CRDPoll = 10 * time.Second
	}
	if o.Probe <= 0 {
		o.Probe = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Source watches the kubeconfig directory and runs one cluster per file.
// Run it once.
type Source struct {
	opts   Options
	sink   store.Sink
	log    *slog.Logger
	filter atomic.Pointer[namespaceFilter]

	files map[string]fileState // by cluster ID; only Run's goroutine
	dupes map[string]bool      // files refused for a taken cluster ID; only Run's goroutine
	// dirMissing: the directory did not exist at the last rescan (reported
	// once, as a problem on it, until it appears); only Run's goroutine.
	dirMissing bool

	// mu guards clusters and the Istio configs delivered, and serialises
	// deliveries, so a replaced cluster's late batch is dropped.
	mu       sync.Mutex
	clusters map[string]*cluster
	istio    map[string]map[config.Key]config.Config // by cluster
	badFiles map[string]string                       // path -> error, for Status
	pending  map[string]bool                         // clusters the first Synced waits for
	synced   bool

	// status: the Gateway API status last written (gatewaystatus.go).
	status statusWriter
}

type fileState struct {
	path string
	hash [32]byte
	bad  bool
}

// New returns a source; it fails only on bad options.
func New(opts Options, sink store.Sink) (*Source, error) {
	opts.setDefaults()
	if opts.Model == nil {
		return nil, errors.New("kube source: Options.Model is required")
	}
	f, err := newNamespaceFilter(opts.DiscoverySelectors)
	if err != nil {
		return nil, fmt.Errorf("kube source: discoverySelectors: %w", err)
	}
	s := &Source{opts: opts, sink: sink, log: opts.Logger, files: map[string]fileState{},
		clusters: map[string]*cluster{}, istio: map[string]map[config.Key]config.Config{}, badFiles: map[string]string{}}
	s.filter.Store(&f)
	return s, nil
}

// SetDiscoverySelectors replaces the namespace selection (mesh config's
// discoverySelectors changed): every cluster is converted again and only
// what the new selection changes is delivered.
func (s *Source) SetDiscoverySelectors(sels []*meshv1alpha1.LabelSelector) error {
	f, err := newNamespaceFilter(sels)
	if err != nil {
		return fmt.Errorf("discoverySelectors: %w", err)
	}
	s.filter.Store(&f)
	s.mu.Lock()
	cs := make([]*cluster, 0, len(s.clusters))
	for _, c := range s.clusters {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	for _, c := range cs {
		c.markAll()
	}
	return nil
}

// maxKubeconfigSize bounds a kubeconfig file (inline certificates make
// a few kilobytes).
const maxKubeconfigSize = 4 << 20

// Run watches the directory until ctx ends, then stops every cluster.
// The directory is watched with the sources' one primitive
// (sources/dirwatch: watched before it is read, an editor's write
// settled over 50 ms, a directory made later, ConfigMap ..data swaps)
// and read again every Rescan besides.
func (s *Source) Run(ctx context.Context) error {
	w, err := dirwatch.New(dirwatch.Options{Dirs: []string{s.opts.Dir}, Settle: 50 * time.Millisecond, Rescan: s.opts.Rescan})
	if err != nil {
		return fmt.Errorf("kube source: %w", err)
	}
	s.mu.Lock()
	s.pending = map[string]bool{}
	s.mu.Unlock()
	syncTimer := time.AfterFunc(s.opts.SyncTimeout, func() { s.maybeSynced(true) })
	defer syncTimer.Stop()
	initial := true
	err = w.Run(ctx, func(dirwatch.Change) {
		s.rescan(ctx, initial)
		if initial {
			s.maybeSynced(false)
			initial = false
		}
	})
	s.stopAll()
	return err
}

// rescan reads the directory and adds, reconnects or removes clusters.
func (s *Source) rescan(ctx context.Context, initial bool) {
	entries, err := os.ReadDir(s.opts.Dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("kubeconfig directory unreadable; clusters stay as they are", "dir", s.opts.Dir, "err", err)
		return
	}
	s.noteDir(errors.Is(err, os.ErrNotExist))
	byID := map[string][]string{} // paths, sorted
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(s.opts.Dir, name)
		if strings.HasPrefix(name, ".") {
			continue // editors' swap files, ConfigMap "..data" links
		}
		if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
			continue
		}
		id := strings.TrimSuffix(name, filepath.Ext(name))
		byID[id] = append(byID[id], path)
	}
	present := map[string]bool{}
	dupes := map[string]bool{}
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		paths := byID[id]
		// The file that holds the ID keeps it; another file with the
		// same name but another extension is refused.
		path := paths[0]
		if old, ok := s.files[id]; ok && slices.Contains(paths, old.path) {
			path = old.path
		}
		for _, p := range paths {
			if p != path {
				dupes[p] = true
				if !s.dupes[p] {
					s.fileProblem(p, fmt.Errorf("cluster ID %q is already taken by %s (the ID is the file name without extension)", id, path))
				}
			}
		}
		present[id] = true
		data, err := dirwatch.ReadFile(path, maxKubeconfigSize) // never blocks on a FIFO swapped in
		if err != nil {
			s.log.Warn("kubeconfig unreadable; cluster unchanged", "file", path, "err", err)
			continue
		}
		h := sha256.Sum256(data)
		old, had := s.files[id]
		if had && old.hash == h && old.path == path {
			continue
		}
		if had && old.path != path {
			s.fileProblem(old.path, nil)
		}
		s.files[id] = fileState{path: path, hash: h}
		cfg, err := loadKubeconfig(path)
		if err != nil {
			s.files[id] = fileState{path: path, hash: h, bad: true}
			s.fileProblem(path, err)
			continue
		}
		s.fileProblem(path, nil)
		s.startCluster(ctx, id, path, cfg, initial)
	}
	current := map[string]bool{}
	for _, f := range s.files {
		current[f.path] = true
	}
	for p := range s.dupes {
		if !dupes[p] && !current[p] {
			s.fileProblem(p, nil) // the duplicate is gone
		}
	}
	s.dupes = dupes
	for id, f := range s.files {
		if !present[id] {
			delete(s.files, id)
			s.fileProblem(f.path, nil)
			s.removeCluster(id)
		}
	}
}

// loadKubeconfig reads a kubeconfig as kubectl does (relative paths are
// relative to the file) and makes its current context's client config.
func loadKubeconfig(path string) (*rest.Config, error) {
	raw, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

func (s *Source) fileProblem(path string, err error) {
	s.mu.Lock()
	if err == nil {
		delete(s.badFiles, path)
	} else {
		s.badFiles[path] = err.Error()
	}
	s.mu.Unlock()
	if err == nil {
		s.sink.SetProblems(path, nil)
		return
	}
	s.opts.Metrics.kubeconfigError()
	s.log.Error("kubeconfig refused; other clusters are not affected, this one keeps its last good connection", "file", path, "err", err)
	s.sink.SetProblems(path, []store.Problem{{Error: "kubeconfig refused (the cluster keeps its last good connection, if any): " + err.Error(), Since: time.Now()}})
}

func (s *Source) startCluster(ctx context.Context, id, path string, cfg *rest.Config, initial bool) {
	c, err := newCluster(s, id, path, cfg)
	if err != nil {
		s.fileProblem(path, err)
		return
	}
	s.mu.Lock()
	old := s.clusters[id]
	s.clusters[id] = c
	if initial {
		s.pending[id] = true
	}
	s.mu.Unlock()
	if old != nil {
		s.log.Info("kubeconfig changed; reconnecting (state kept until the new connection syncs)", "cluster", id, "file", path)
		old.stop()
	} else {
		s.log.Info("cluster added", "cluster", id, "file", path, "server", cfg.Host)
	}
	c.start(ctx)
}

func (s *Source) removeCluster(id string) {
	s.mu.Lock()
	c := s.clusters[id]
	delete(s.clusters, id)
	delete(s.pending, id)
	s.mu.Unlock()
	if c == nil {
		return
	}
	c.stop()
	s.log.Info("cluster removed", "cluster", id)
	s.mu.Lock()
	s.opts.Model(model.KubeUpdate{Cluster: id, Full: true})
	s.deliverIstioLocked(id, nil, nil, true)
	s.mu.Unlock()
	c.clearProblems()
	s.opts.Metrics.forget(id)
	s.maybeSynced(false)
}

func (s *Source) stopAll() {
	s.mu.Lock()
	cs := make([]*cluster, 0, len(s.clusters))
	for _, c := range s.clusters {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	for _, c := range cs {
		c.stop()
	}
}

// deliver hands a cluster's batch on, unless the cluster was replaced or
// removed meanwhile.
func (s *Source) deliver(c *cluster, u model.KubeUpdate, ups []config.Config, dels []config.Key, istioFull bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clusters[c.id] != c {
		return false
	}
	if u.Full || len(u.Services)+len(u.DeletedServices)+len(u.Pods)+len(u.DeletedPods) > 0 {
		s.opts.Model(u)
	}
	s.deliverIstioLocked(c.id, ups, dels, istioFull)
	s.opts.Metrics.update(c.id)
	return true
}

// deliverIstioLocked records a cluster's Istio configs and sends the sink
// what changed in the merge: when clusters hold the same key, the one
// whose ID sorts first wins. full replaces everything the cluster held.
func (s *Source) deliverIstioLocked(id string, ups []config.Config, dels []config.Key, full bool) {
	old := s.istio[id]
	touched := map[config.Key]bool{}
	if full {
		for k := range old {
			touched[k] = true
		}
	}
	for _, c := range ups {
		touched[c.Key()] = true
	}
	for _, k := range dels {
		touched[k] = true
	}
	before := s.winners(touched)
	held := make(map[config.Key]config.Config, len(old)+len(ups))
	if !full {
		for k, c := range old {
			held[k] = c
		}
	}
	for _, c := range ups {
		held[c.Key()] = c
	}
	for _, k := range dels {
		delete(held, k)
	}
	if len(held) == 0 {
		delete(s.istio, id)
	} else {
		s.istio[id] = held
	}
	after := s.winners(touched)
	var outUps []config.Config
	var outDels []config.Key
	for k := range touched {
		a, ok := after[k]
		switch b, had := before[k]; {
		case ok && (!had || !config.SameContent(&a, &b) || a.Source != b.Source):
			outUps = append(outUps, a)
		case !ok && had:
			outDels = append(outDels, k)
		}
	}
	if len(outUps)+len(outDels) > 0 {
		store.SortConfigs(outUps)
		sort.Slice(outDels, func(i, j int) bool { return outDels[i].String() < outDels[j].String() })
		s.sink.Update(outUps, outDels)
	}
}

// lastGood returns the config of key that cluster id delivered last.
func (s *Source) lastGood(id string, key config.Key) (config.Config, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.istio[id][key]
	return c, ok
}

func (s *Source) winners(keys map[config.Key]bool) map[config.Key]config.Config {
	ids := make([]string, 0, len(s.istio))
	for id := range s.istio {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := map[config.Key]config.Config{}
	for k := range keys {
		for _, id := range ids {
			if c, ok := s.istio[id][k]; ok {
				out[k] = c
				break
			}
		}
	}
	return out
}

// clusterSynced is called once per cluster instance after its first full
// delivery.
func (s *Source) clusterSynced(id string) {
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
	s.maybeSynced(false)
}

// maybeSynced tells the sink the source has synced once every cluster
// present at start has (or timedOut).
func (s *Source) maybeSynced(timedOut bool) {
	s.mu.Lock()
	if s.synced || s.pending == nil || (len(s.pending) > 0 && !timedOut) {
		s.mu.Unlock()
		return
	}
	s.synced = true
	var waiting []string
	for id := range s.pending {
		waiting = append(waiting, id)
	}
	s.mu.Unlock()
	if len(waiting) > 0 {
		sort.Strings(waiting)
		s.log.Warn("clusters not synced in time; going on without them (they join when they sync)", "clusters", waiting, "timeout", s.opts.SyncTimeout)
	}
	s.sink.Synced()
}
