package envoyfilter_test

import (
	"testing"

	"github.com/baremesh/baremesh/core/testkit"
)

// TestMain fails the package's tests if they leave goroutines running.
func TestMain(m *testing.M) { testkit.Main(m.Run) }
