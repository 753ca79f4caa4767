package lds

import (
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/baremesh/baremesh/xdsserver/gen/telemetry"
)

// statsFilters are istio.stats filters of the metrics providers
// (Prometheus), before the router. (Filled in with the Telemetry API's
// metrics.)
func statsFilters(cfg *telemetry.Config, class httpClass) []*hcmv3.HttpFilter {
	return nil
}
