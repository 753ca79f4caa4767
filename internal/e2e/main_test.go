package e2e

import (
	"os"
	"testing"
)

// TestMain turns on the cache assertion: every cache hit is regenerated
// and compared (see xdsserver/build).
func TestMain(m *testing.M) {
	os.Setenv("BAREMESH_CACHE_ASSERT", "1")
	os.Exit(m.Run())
}
