package agent

import (
	"slices"
	"strings"
	"testing"
)

func TestPlanReload(t *testing.T) {
	const base = "capture: {backend: nft}\nstatusAddress: 127.0.0.1:15022\n"
	for _, tc := range []struct {
		name, next     string
		apply, restart []string
		check          func(t *testing.T, p ReloadPlan)
	}{
		{name: "same", next: base},
		{name: "same, written differently", next: "statusAddress: 127.0.0.1:15022\ncapture:\n  backend: nft\n  mode: REDIRECT\n  inboundPorts: ['*']\n"},
		{name: "capture ports", next: strings.Replace(base, "{backend: nft}", "{backend: nft, inboundPortsExclude: [8081]}", 1),
			apply: []string{"capture"}},
		{name: "excluded CIDRs", next: strings.Replace(base, "{backend: nft}", "{backend: nft, outboundIPRangesExclude: [10.0.0.0/8]}", 1),
			apply: []string{"capture"}},
		{name: "capture off", next: strings.Replace(base, "{backend: nft}", "{backend: nft, disabled: true}", 1), apply: []string{"capture"}},
		{name: "backend and chain prefix wait", next: strings.Replace(base, "{backend: nft}", "{backend: legacy, chainPrefix: X, dnsPort: 5353}", 1),
			apply: []string{"capture"}, restart: []string{"capture.backend", "capture.chainPrefix"},
			check: func(t *testing.T, p ReloadPlan) {
				if p.Config.Capture.Backend != "nft" || p.Config.Capture.ChainPrefix != "BAREMESH" || p.Config.Capture.DNSPort != 5353 {
					t.Errorf("in force: %+v", p.Config.Capture)
				}
			}},
		{name: "backend of capture turned off applies", next: "capture: {backend: legacy, disabled: true}\nstatusAddress: 127.0.0.1:15022\n",
			apply: []string{"capture"}},
		{name: "listener, netns, log format wait", next: "capture: {backend: nft}\nstatusAddress: 127.0.0.1:1\nnetns: x\nlog: {format: json, level: debug}\n",
			apply: []string{"log.level"}, restart: []string{"statusAddress", "netns", "log.format"},
			check: func(t *testing.T, p ReloadPlan) {
				if p.Config.StatusAddress != "127.0.0.1:15022" || p.Config.NetNS != "" || p.Config.Log.Format != "text" || p.Config.Log.Level != "debug" {
					t.Errorf("in force: %+v", p.Config)
				}
			}},
		{name: "sections", next: base + "proxy: {path: /bin/true}\ncontrolPlane: {address: cp:15010}\ninterval: 1s\n" +
			"tunnel: {enabled: true, nodeUnderlay: 10.0.0.1, proxyUnderlay: 10.0.0.2, proxyNetns: z}\nrepair: {enabled: true, node: n}\n",
			apply: []string{"proxy", "controlPlane", "tunnel", "repair", "interval"}},
		{name: "disabled sections edited", next: base + "tunnel: {kind: vxlan}\nrepair: {node: n}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			running, err := Parse("old.yaml", []byte(base))
			if err != nil {
				t.Fatal(err)
			}
			next, err := Parse("new.yaml", []byte(tc.next))
			if err != nil {
				t.Fatal(err)
			}
			p := PlanReload(running, next)
			if !slices.Equal(p.Apply, tc.apply) || !slices.Equal(p.Restart, tc.restart) {
				t.Errorf("apply %v restart %v; want %v %v", p.Apply, p.Restart, tc.apply, tc.restart)
			}
			if p.Changed() != (len(tc.apply) > 0) {
				t.Errorf("Changed() = %v", p.Changed())
			}
			if tc.check != nil {
				tc.check(t, p)
			}
			// What is in force is a fixed point: planning it again
			// changes nothing and waits for nothing new.
			again := PlanReload(p.Config, next)
			if len(again.Apply) != 0 || !slices.Equal(again.Restart, tc.restart) {
				t.Errorf("planned again: %+v", again)
			}
		})
	}
}

func TestPlanReloadReadySince(t *testing.T) {
	a, err := Parse("a.yaml", []byte("repair: {enabled: true, node: n, readySince: 2025-01-02T03:04:05+02:00}\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse("b.yaml", []byte("repair: {enabled: true, node: n, readySince: 2025-01-02T01:04:05Z}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p := PlanReload(a, b); len(p.Apply) != 0 {
		t.Errorf("the same instant in another zone: %v", p.Apply)
	}
}
