package iptables

import (
	"testing"

	"github.com/baremesh/baremesh/nodeagent/leakcheck"
	"github.com/baremesh/baremesh/nodeagent/nstest"
)

func TestMain(m *testing.M) {
	nstest.MaybeHelper()
	leakcheck.Main(func() int {
		code := m.Run()
		nstest.Cleanup()
		return code
	})
}
