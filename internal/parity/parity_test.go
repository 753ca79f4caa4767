package parity

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
)

// TestMain fails the tests if they leave goroutines running.
func TestMain(m *testing.M) { testkit.Main(m.Run) }

// benchDir is Istio's benchmark configs beside the repository.
const benchDir = "../../../shared/bench/istio"

// TestParity connects the same proxies, with the same config, to istiod and
// to baremeshd and compares what each sends, resource by resource. It fails
// on any difference that catalog.yaml does not list. PARITY_FULL=1 runs the
// scenarios untrimmed and PARITY_REPORT=FILE writes the full report there
// (make parity does both); PARITY_SCENARIO=substring runs only matching
// scenarios.
func TestParity(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver and istiod")
	}
	full := os.Getenv("PARITY_FULL") != ""
	proxies, err := LoadProxies("testdata/proxies.yaml")
	must(t, err)
	scenarios, err := LoadScenarios("testdata/scenarios.yaml")
	must(t, err)
	cat, err := LoadCatalog("catalog.yaml")
	must(t, err)
	ist := startIstiod(t)
	defer func() {
		if ist.probe != nil {
			ist.probe.cancel()
		}
	}()

	start := time.Now()
	rep := &Report{}
	var norm Normalizer
	for _, s := range scenarios {
		if f := os.Getenv("PARITY_SCENARIO"); f != "" && !strings.Contains(s.Name, f) {
			continue
		}
		if strings.HasPrefix(s.Files[0], "$BENCH/") {
			if _, err := os.Stat(benchDir); err != nil {
				rep.Skipped = append(rep.Skipped, s.Name+": "+benchDir+" missing")
				continue
			}
		}
		t.Run(s.Name, func(t *testing.T) {
			results := runScenario(t, ist, s, proxies, &norm, !full)
			for _, r := range results {
				r.Classify(cat, r.diffs)
				rep.Results = append(rep.Results, r.Result)
				for i, d := range r.Unexplained {
					if i == 5 {
						t.Errorf("%s / %s: … %d more unexplained", r.Scenario, r.Proxy, len(r.Unexplained)-5)
						break
					}
					t.Errorf("unexplained: scenario %s, proxy %s: %s", r.Scenario, r.Proxy, d.Difference)
				}
			}
		})
	}
	rep.Duration = time.Since(start)
	rep.UnknownTypes = norm.UnknownTypes()
	t.Log(rep.Summary())
	var b strings.Builder
	rep.Write(&b, 0)
	if p := os.Getenv("PARITY_REPORT"); p != "" {
		must(t, os.WriteFile(p, []byte(b.String()), 0o644))
	} else if testing.Verbose() {
		var short strings.Builder
		rep.Write(&short, 3)
		t.Log("\n" + short.String())
	}
}

type scenarioResult struct {
	*Result
	diffs []Difference
}

// runScenario gives both control planes the scenario, connects its proxies
// to both at once and compares what each proxy got.
func runScenario(t *testing.T, ist *istiod, s *Scenario, proxies map[string]*Proxy, norm *Normalizer, trim bool) []scenarioResult {
	docs, err := s.Load("testdata/base.yaml", benchDir, trim)
	must(t, err)
	mesh, err := s.MeshYAML()
	must(t, err)
	ist.setMesh(t, mesh)
	networks, err := s.NetworksYAML()
	must(t, err)
	ist.setNetworks(t, networks)
	ist.apply(t, docs)
	ist.stampCreation(docs)
	config, err := YAML(docs)
	must(t, err)
	ist.noStaleTelemetry(t)
	ours, stop := startBaremesh(t, config, mesh, networks)
	defer stop()

	names := append(append([]string(nil), DefaultProxies...), s.Proxies...)
	var list []*Proxy
	for _, n := range names {
		p := proxies[n]
		if p == nil {
			t.Fatalf("scenario %s: no proxy %q in proxies.yaml", s.Name, n)
		}
		if p.ScenarioTargets > 0 {
			p = p.withListeners(GRPCTargets(docs, p.ScenarioTargets))
		}
		list = append(list, p)
	}
	opts := CollectOptions{Quiet: time.Second, Timeout: 60 * time.Second}
	if !trim {
		// Whole benchmark scenarios (1,000 gateways, services) on a
		// busy machine: a response can take longer than 5 s to come.
		opts.Pending, opts.Timeout = 30*time.Second, 180*time.Second
	}
	type got struct {
		istiod, ours Resources
		errA, errB   error
	}
	out := make([]got, len(list))
	var wg sync.WaitGroup
	for i, p := range list {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if r, err := Collect(context.Background(), ist.grpcAddr, p, opts); err != nil {
				out[i].errA = fmt.Errorf("istiod: %w", err)
			} else {
				out[i].istiod = r
			}
		}()
		go func() {
			defer wg.Done()
			if r, err := Collect(context.Background(), ours, p, opts); err != nil {
				out[i].errB = fmt.Errorf("baremeshd: %w", err)
			} else {
				out[i].ours = r
			}
		}()
	}
	wg.Wait()
	var results []scenarioResult
	for i, p := range list {
		if out[i].errA != nil || out[i].errB != nil {
			t.Errorf("scenario %s: %v", s.Name, errors.Join(out[i].errA, out[i].errB))
			continue
		}
		ta, err := trees(norm, out[i].istiod)
		must(t, err)
		tb, err := trees(norm, out[i].ours)
		must(t, err)
		if d := os.Getenv("PARITY_DUMP"); d != "" {
			dir := filepath.Join(d, strings.ReplaceAll(s.Name, "/", "_"), p.Name)
			must(t, norm.Dump(dir, "istiod", out[i].istiod))
			must(t, norm.Dump(dir, "ours", out[i].ours))
		}
		diffs, compared, equal := DiffResources(ta, tb)
		results = append(results, scenarioResult{&Result{Scenario: s.Name, Proxy: p.Name, Kind: p.Kind,
			IstiodCount: typeCounts(out[i].istiod), OursCount: typeCounts(out[i].ours), Compared: compared, Equal: equal,
			IstiodBytes: out[i].istiod.Bytes(), OursBytes: out[i].ours.Bytes()}, diffs})
	}
	return results
}

func trees(norm *Normalizer, r Resources) (map[string]map[string]Tree, error) {
	out := map[string]map[string]Tree{}
	for typ, m := range r {
		out[typ] = map[string]Tree{}
		for name, msg := range m {
			t, err := norm.Tree(msg)
			if err != nil {
				return nil, fmt.Errorf("%s/%s: %w", typ, name, err)
			}
			out[typ][name] = t
		}
	}
	return out, nil
}

func typeCounts(r Resources) map[string]int {
	out := map[string]int{}
	for typ, m := range r {
		out[typ] = len(m)
	}
	return out
}
