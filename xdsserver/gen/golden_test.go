package gen_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen"
	"github.com/baremesh/baremesh/xdsserver/gen/cds"
	"github.com/baremesh/baremesh/xdsserver/gen/eds"
	"github.com/baremesh/baremesh/xdsserver/gen/gentest"
	"github.com/baremesh/baremesh/xdsserver/gen/lds"
	"github.com/baremesh/baremesh/xdsserver/gen/rds"
	"github.com/baremesh/baremesh/xdsserver/gen/sds"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/*/golden")

// TestGolden generates LDS, RDS, SDS (when listeners name secrets), CDS and EDS for every proxy of every
// scenario in testdata, validates every resource (and every Any inside)
// and compares the output with the golden files. RDS and EDS ask for
// what LDS and CDS refer to, as a proxy would.
func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob("testdata/*/proxies.yaml")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range dirs {
		dir := filepath.Dir(f)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			pc := gentest.Scenario(t, dir)
			for _, spec := range gentest.Proxies(t, dir) {
				t.Run(spec.Name, func(t *testing.T) {
					p := spec.Proxy(t)
					run := func(typ string, g gen.Generator, names []string) []gen.Resource {
						if n, ok := spec.Names[typ]; ok {
							names = n
						}
						res, err := g(gen.Input{Push: pc, Proxy: p, Names: names})
						if err != nil {
							t.Fatalf("%s: %v", typ, err)
						}
						gentest.Validate(t, res)
						gentest.Golden(t, filepath.Join(dir, "golden", spec.Name+"."+typ+".json"), gentest.JSON(t, res), *update)
						return res
					}
					ls := run("lds", lds.Generate, nil)
					if names := gentest.SecretNames(ls); len(names) > 0 && p.Type == model.Router { // sidecars get default and ROOTCA from their agent
						run("sds", sds.Generate, names)
					}
					run("rds", rds.Generate, gentest.RouteNames(ls))
					cs := run("cds", cds.Generate, nil)
					run("eds", eds.Generate, gentest.EDSNames(cs))
				})
			}
		})
	}
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(m.Run())
}
