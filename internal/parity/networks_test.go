package parity

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"testing"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
)

// setNetworks gives istiod the meshNetworks yaml ("" for none) and waits
// until it serves those gateways (/debug/networkz) and has pushed since.
func (i *istiod) setNetworks(t *testing.T, yaml string) {
	t.Helper()
	if yaml == i.networks {
		return
	}
	n, err := config.ParseMeshNetworks([]byte(yaml), "networks")
	must(t, err)
	var want []string
	gws := model.NewNetworkGateways(n, model.GatewayLookups{})
	for name := range n.GetNetworks() {
		for _, gw := range gws.For(name) {
			want = append(want, fmt.Sprintf("%s %s:%d", gw.Network, gw.Addr, gw.Port))
		}
	}
	slices.Sort(want)
	if i.probe == nil {
		i.probe = startProbe(t, i.grpcAddr)
	}
	pushes := i.probe.n.Load()
	body := yaml
	if body == "" {
		body = "networks: {}\n"
	}
	i.replaceFile(t, "meshNetworks.yaml", body, "the scenario's meshNetworks", pushes, func() bool {
		resp, err := http.Get("http://" + i.httpAddr + "/debug/networkz")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var list []struct {
			Network, Addr string
			Port          uint32
		}
		if json.Unmarshal(b, &list) != nil {
			return false
		}
		got := make([]string, 0, len(list))
		for _, g := range list {
			got = append(got, fmt.Sprintf("%s %s:%d", g.Network, g.Addr, g.Port))
		}
		slices.Sort(got)
		return slices.Equal(got, want)
	})
	i.networks = yaml
}

// NetworksYAML is the scenario's meshNetworks file's content ("" for none).
func (s *Scenario) NetworksYAML() (string, error) {
	if s.Networks == "" {
		return "", nil
	}
	b, err := os.ReadFile(s.Networks)
	if err != nil {
		return "", fmt.Errorf("scenario %s: networks: %w", s.Name, err)
	}
	return string(b), nil
}
