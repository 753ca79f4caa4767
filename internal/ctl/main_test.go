package ctl

import (
	"testing"

	"github.com/baremesh/baremesh/core/testkit"
)

// TestMain fails the package if a test leaves goroutines behind (a daemon,
// an ADS stream or an HTTP connection not closed).
func TestMain(m *testing.M) { testkit.Main(m.Run) }
