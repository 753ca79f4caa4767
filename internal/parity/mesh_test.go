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
	path := filepath.Join(i.dir, "mesh.yaml")
	must(t, os.WriteFile(path+".tmp", []byte(body), 0o644))
	must(t, os.Rename(path+".tmp", path))
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + i.httpAddr + "/debug/mesh")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(b), marker) {
				// ... and until its push context holds it (pushProbe).
				i.probe.waitBeyond(t, pushes, "the push of the new mesh config")
				i.mesh = yaml
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("istiod did not load the scenario's mesh config within 30s")
		}
		time.Sleep(100 * time.Millisecond) // polling istiod's mesh config, not synchronisation
	}
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
