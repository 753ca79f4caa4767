package sourcetest

import (
	"context"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
)

func contextWithTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), Timeout)
}

func sePort(c config.Config) int {
	se, ok := c.Spec.(*networking.ServiceEntry)
	if !ok || len(se.GetPorts()) == 0 {
		return 0
	}
	return int(se.GetPorts()[0].GetNumber())
}
