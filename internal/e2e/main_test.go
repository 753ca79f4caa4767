package e2e

import (
	"os"
	"testing"

	"github.com/baremesh/baremesh/core/testkit"
)

// TestMain turns on the cache assertion (every cache hit is regenerated
// and compared, see xdsserver/generation) and fails the tests if they leave
// goroutines running.
func TestMain(m *testing.M) {
	os.Setenv("BAREMESH_CACHE_ASSERT", "1")
	testkit.Main(m.Run)
}
