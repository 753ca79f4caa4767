package cni

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/nodeagent/nstest"
)

// TestMain doubles as the plugin: the tests link the test binary into the
// CNI bin dir as baremesh-cni, so libcni execs this very code (with the
// race detector on under `make test`).
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == PluginName {
		Main("baremesh-cni (test binary)")
		os.Exit(0)
	}
	nstest.MaybeHelper()
	testkit.Main(func() int {
		code := m.Run()
		stopKube()
		nstest.Cleanup()
		return code
	})
}
