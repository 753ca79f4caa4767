package gentest

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/gen"
)

// The generator tests' set-up, once: a snapshot from YAML (MustBuild), a
// proxy from an xDS node (Node, or ProxySpec.Proxy for labels and the
// rest), the generator run and its output validated (Run), and the
// resources by name (ByName).

// MustBuild is Build for one test: the snapshot of the YAML files (each
// may hold several "---" separated documents), or the test fails.
func MustBuild(t testing.TB, files ...string) *push.PushContext {
	t.Helper()
	data := make([][]byte, len(files))
	for i, f := range files {
		data[i] = []byte(f)
	}
	pc, err := Build(data...)
	if err != nil {
		t.Fatal(err)
	}
	return pc
}

// Node is the proxy that an xDS node with id and string metadata
// describes, parsed by gen.ParseNode as the server would, or the test
// fails. For labels, a locality or an identity, use ProxySpec.Proxy.
func Node(t testing.TB, id string, meta map[string]string) *model.Proxy {
	t.Helper()
	return ProxySpec{ID: id, Metadata: meta}.Proxy(t)
}

// Run generates in with g and validates every resource (Validate); an
// error fails the test.
func Run(t testing.TB, g gen.Generator, in gen.Input) []gen.Resource {
	t.Helper()
	res, err := g(in)
	if err != nil {
		t.Fatal(err)
	}
	Validate(t, res)
	return res
}

// ByName indexes resources of one Envoy type by name; a resource of
// another type panics.
func ByName[T proto.Message](res []gen.Resource) map[string]T {
	out := make(map[string]T, len(res))
	for _, r := range res {
		out[r.Name] = r.Resource.(T)
	}
	return out
}
