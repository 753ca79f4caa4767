package iptables

import (
	"testing"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/nodeagent/nstest"
)

func TestMain(m *testing.M) {
	nstest.MaybeHelper()
	testkit.Main(func() int {
		code := m.Run()
		nstest.Cleanup()
		return code
	})
}
