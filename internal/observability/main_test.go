package observability

import (
	"testing"

	"github.com/baremesh/baremesh/core/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m.Run) }
