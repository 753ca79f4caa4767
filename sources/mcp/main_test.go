package mcp_test

import (
	"testing"

	"github.com/baremesh/baremesh/core/testkit"
)

// TestMain fails the run if a goroutine (an Upstream's session or receive
// loop, a stand-in's stream) outlives the tests.
func TestMain(m *testing.M) { testkit.Main(m.Run) }
