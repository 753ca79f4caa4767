package parity

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// setMesh gives istiod the mesh config yaml (Istio's defaults under it;
// "" for the defaults alone) and waits until istiod serves it
// (/debug/mesh). A scenario with a mesh file gets it; the next scenario
// without one restores the defaults. istiod watches its mesh file; a
// marker (ingressClass, which only Kubernetes Ingress reads, and the
// harness has none) tells the reloaded config from the previous one;
// then a push to a probe proxy tells that istiod's push context has it.
func (i *istiod) setMesh(t *testing.T, yaml string) {
	t.Helper()
	if yaml == i.mesh {
		return
	}
	if i.probe == nil {
		i.probe = startProbe(t, i.grpcAddr)
	}
	pushes := i.probe.n.Load()
	i.meshGen++
	marker := fmt.Sprintf("parity-mesh-%d", i.meshGen)
	body := yaml + "\ningressClass: " + marker + "\n"
	if yaml == "" {
		body = "ingressClass: " + marker + "\n"
	}
	i.replaceFile(t, "mesh.yaml", body, "the scenario's mesh config", pushes, func() bool {
		resp, err := http.Get("http://" + i.httpAddr + "/debug/mesh")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return strings.Contains(string(b), marker)
	})
	i.mesh = yaml
}

// replaceFile replaces istiod's watched file name (in its directory)
// with body, waits until loaded says istiod serves it (polled, up to
// 30 s: what names it in the failure), then until a push after pushes
// (the probe's count before the change) tells that its push context has
// it.
func (i *istiod) replaceFile(t *testing.T, name, body, what string, pushes int64, loaded func() bool) {
	t.Helper()
	path := filepath.Join(i.dir, name)
	must(t, os.WriteFile(path+".tmp", []byte(body), 0o644))
	must(t, os.Rename(path+".tmp", path))
	deadline := time.Now().Add(30 * time.Second)
	for !loaded() {
		if time.Now().After(deadline) {
			t.Fatalf("istiod did not load %s within 30s", what)
		}
		time.Sleep(100 * time.Millisecond) // polling istiod's debug pages, not synchronisation
	}
	i.probe.waitBeyond(t, pushes, "the push of "+what)
}

// MeshYAML is the scenario's mesh config file's content ("" for none).
func (s *Scenario) MeshYAML() (string, error) {
	if s.Mesh == "" {
		return "", nil
	}
	b, err := os.ReadFile(s.Mesh)
	if err != nil {
		return "", fmt.Errorf("scenario %s: mesh: %w", s.Name, err)
	}
	return string(b), nil
}

// noStaleTelemetry waits until istiod's store holds no Telemetry that an
// earlier scenario applied and this one lacks (apply waits for the kinds
// of kindOfOurs only).
func (i *istiod) noStaleTelemetry(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + i.httpAddr + "/debug/configz")
		if err == nil {
			var list []struct {
				Kind     string                           `json:"kind"`
				Metadata struct{ Name, Namespace string } `json:"metadata"`
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			stale := ""
			if json.Unmarshal(b, &list) == nil {
				for _, c := range list {
					if k := c.Kind + "/" + c.Metadata.Namespace + "/" + c.Metadata.Name; c.Kind == "Telemetry" && i.applied[k].name == "" {
						stale = k
					}
				}
				if stale == "" {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("istiod still holds a Telemetry of an earlier scenario after 30s")
		}
		time.Sleep(50 * time.Millisecond) // polling istiod's store, not synchronisation
	}
}
