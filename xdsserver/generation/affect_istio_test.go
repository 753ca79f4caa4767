package generation

import (
	"slices"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// TestAffectedIstioConfigTypes: a change of a kind regenerates the Istio
// config type serving that kind, WorkloadGroups (inert for Envoy) and
// ServiceEntries (judged by services for Envoy) included, and no other
// Istio config type.
func TestAffectedIstioConfigTypes(t *testing.T) {
	pc := snapshotOf(t)
	p := &model.Proxy{Type: model.SidecarProxy, Namespace: "istio-system"}
	for _, tc := range []struct {
		kind config.Kind
		want []string
	}{
		{config.VirtualService, []string{"lds", "mcp-virtualservice", "rds"}},
		{config.WorkloadGroup, []string{"mcp-workloadgroup"}},
		{config.ServiceEntry, []string{"mcp-serviceentry"}}, // no service changed: nothing for Envoy
		{config.AuthorizationPolicy, []string{"lds", "mcp-authorizationpolicy"}},
	} {
		req := &push.Request{Full: true, Configs: map[config.Key]bool{{Kind: tc.kind, Namespace: "default", Name: "x"}: true}}
		var got []string
		for ty := range Affected(xdstype.All, pc, p, req) {
			got = append(got, ty.Short)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s change: types %s, want %s", tc.kind, strings.Join(got, " "), strings.Join(tc.want, " "))
		}
	}
}
