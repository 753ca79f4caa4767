package gentest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	yaml3 "gopkg.in/yaml.v3"
	"sigs.k8s.io/yaml"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/credentials"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/core/store"
)

// Scenario builds a snapshot from every *.yaml file in dir except
// proxies.yaml (multi-document, "---" separated). Documents of kinds
// baremesh does not know are skipped; a document that fails to decode
// or validate fails t.
func Scenario(t testing.TB, dir string) *push.PushContext {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var data [][]byte
	for _, f := range files {
		if filepath.Base(f) == "proxies.yaml" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, b)
	}
	pc, err := Build(data...)
	if err != nil {
		t.Fatalf("scenario %s: %v", dir, err)
	}
	pc.Credentials = Credentials(t, filepath.Join(dir, "credentials"))
	return pc
}

// Credentials reads a credentials directory (NAME/tls.crt, tls.key,
// ca.crt, namespaces), as the daemon's credentials source does; nil if
// dir does not exist.
func Credentials(t testing.TB, dir string) *credentials.Set {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var creds []*credentials.Credential
	for _, e := range ents {
		files := map[string][]byte{}
		for _, f := range []string{credentials.CertFile, credentials.KeyFile, credentials.CAFile, credentials.NamespaceFile} {
			if b, err := os.ReadFile(filepath.Join(dir, e.Name(), f)); err == nil {
				files[f] = b
			}
		}
		creds = append(creds, credentials.Parse(e.Name(), files))
	}
	return credentials.NewSet(creds)
}

// Build makes a snapshot from YAML documents: decoded with
// config.Typed, put in a store.Memory, applied to a model.Registry, then
// push.Build with the default mesh config.
func Build(files ...[]byte) (*push.PushContext, error) {
	return BuildKube(nil, files...)
}

// BuildKube is Build with Kubernetes updates (Services, endpoints of a
// cluster) applied to the registry after the YAML documents.
func BuildKube(kube []model.KubeUpdate, files ...[]byte) (*push.PushContext, error) {
	var cfgs []config.Config
	for _, data := range files {
		docs, err := Decode(data)
		if err != nil {
			return nil, err
		}
		cfgs = append(cfgs, docs...)
	}
	mem := store.NewMemory()
	reg := model.NewRegistry(model.NewAllocator())
	mem.Subscribe(func(events []store.Event) {
		// The registry must see ServiceEntries before the WorkloadEntries
		// they select, whatever the file order.
		slices.SortStableFunc(events, func(a, b store.Event) int {
			return kindRank(a.Key().Kind) - kindRank(b.Key().Kind)
		})
		reg.Apply(model.Update{Events: events})
	})
	mem.Apply(cfgs, nil)
	for _, u := range kube {
		reg.Apply(model.Update{Kube: &u})
	}
	return push.Build(nil, push.Inputs{Store: mem, Registry: reg, Mesh: config.DefaultMeshConfig()}, nil, time.Unix(0, 0)), nil
}

func kindRank(k config.Kind) int {
	if k == config.ServiceEntry {
		return 0
	}
	return 1
}

// Decode splits a multi-document YAML file and types each known
// document; unknown kinds are skipped.
func Decode(data []byte) ([]config.Config, error) {
	var out []config.Config
	dec := yaml3.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		var node yaml3.Node
		if err := dec.Decode(&node); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		b, err := yaml3.Marshal(&node)
		if err != nil {
			return nil, err
		}
		var raw map[string]any
		if err := yaml.Unmarshal(b, &raw); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(raw) == 0 {
			continue
		}
		api, _ := raw["apiVersion"].(string)
		kind, _ := raw["kind"].(string)
		if _, err := config.Lookup(api, kind); err != nil || !strings.Contains(api, "istio.io") && !strings.HasPrefix(api, config.GatewayAPIGroup+"/") {
			continue
		}
		c, err := config.Typed(raw, config.Source{Name: "gentest", Line: node.Line})
		if err != nil {
			return nil, fmt.Errorf("document %d (line %d): %w", i, node.Line, err)
		}
		out = append(out, c)
	}
}
