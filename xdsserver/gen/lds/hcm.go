package lds

import (
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/baremesh/baremesh/xdsserver/gen"
)

// rdsFilter is hcmFilter of hcmRDS(statPrefix, routeName) with o's
// settings applied: an HTTP connection manager with Istio's sidecar
// filters and settings fetching routeName over ADS. A gateway has one per HTTPS server (a thousand in Istio's
// gateway benchmark), and packing each through proto.Marshal was most of
// its LDS time, though only the two names differ. So its bytes are
// written directly: the names around the constant, once marshalled
// (filters and settings, memoized per settings, and config source), in
// the order proto.Marshal writes the fields (stat_prefix is the lowest
// field set; the route_specifier oneof comes after the plain fields), so
// the bytes are the same (TestRDSFilterBytes checks it).
func rdsFilter(o hcmOpts, statPrefix, routeName string) *listenerv3.Filter {
	rest := o.restBytes()
	if o.istio {
		statPrefix = delimitedStat(statPrefix)
	}
	rdsLen := len(hcmADSField)
	if routeName != "" {
		rdsLen += protowire.SizeTag(rdsRouteConfigName) + protowire.SizeBytes(len(routeName))
	}
	n := protowire.SizeTag(hcmRds) + protowire.SizeBytes(rdsLen) + len(rest)
	if statPrefix != "" {
		n += protowire.SizeTag(hcmStatPrefix) + protowire.SizeBytes(len(statPrefix))
	}
	b := make([]byte, 0, n)
	if statPrefix != "" {
		b = protowire.AppendTag(b, hcmStatPrefix, protowire.BytesType)
		b = protowire.AppendString(b, statPrefix)
	}
	b = append(b, rest...)
	b = protowire.AppendTag(b, hcmRds, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(rdsLen))
	b = append(b, hcmADSField...)
	if routeName != "" {
		b = protowire.AppendTag(b, rdsRouteConfigName, protowire.BytesType)
		b = protowire.AppendString(b, routeName)
	}
	blk := &struct {
		f   listenerv3.Filter
		tc  listenerv3.Filter_TypedConfig
		any anypb.Any
	}{}
	blk.any.TypeUrl, blk.any.Value = hcmTypeURL, b
	blk.tc.TypedConfig = &blk.any
	blk.f.Name, blk.f.ConfigType = hcmName, &blk.tc
	return &blk.f
}

// Field numbers of HttpConnectionManager and Rds that rdsFilter writes.
const (
	hcmStatPrefix      protowire.Number = 2 // stat_prefix
	hcmRds             protowire.Number = 3 // rds (route_specifier)
	rdsRouteConfigName protowire.Number = 2 // Rds.route_config_name
)

var (
	hcmTypeURL = gen.MustAny(&hcmv3.HttpConnectionManager{}).GetTypeUrl()
	// hcmADSField is Rds.config_source (field 1): sharedADS, marshalled.
	hcmADSField = gen.MustAny(&hcmv3.Rds{ConfigSource: sharedADS}).GetValue()
)
