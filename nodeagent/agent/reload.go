package agent

import (
	"reflect"
	"slices"
)

// ReloadPlan says what a new configuration changes.
type ReloadPlan struct {
	// Apply are the changed settings (YAML names) a reload applies in
	// place: capture, proxy, controlPlane, tunnel, repair, interval,
	// log.level.
	Apply []string
	// Restart are the changed settings that only take effect after a
	// restart: statusAddress, netns, log.format, and capture.backend and
	// capture.chainPrefix while capture stays on.
	Restart []string
	// Config is what the agent runs after the reload: the new
	// configuration with the restart-only settings kept as they run now.
	Config Config
}

// Changed reports whether the reload changes anything in force.
func (p ReloadPlan) Changed() bool { return len(p.Apply) > 0 }

// PlanReload compares the configuration in force with a new validated
// one. It is pure.
//
// Restart-only settings are those the agent cannot change without a gap
// or a second owner: the status listener, the network namespace, the log
// handler, and the iptables backend and chain names of rules in force
// (the old rules would have to go before the new ones are in). Because
// running keeps their values in force, a setting changed and changed back
// is no longer reported.
func PlanReload(running, next Config) ReloadPlan {
	var p ReloadPlan
	eff := next
	restart := func(name string, differ bool, keep func()) {
		if differ {
			p.Restart = append(p.Restart, name)
			keep()
		}
	}
	restart("statusAddress", next.StatusAddress != running.StatusAddress, func() { eff.StatusAddress = running.StatusAddress })
	restart("netns", next.NetNS != running.NetNS, func() { eff.NetNS = running.NetNS })
	restart("log.format", next.Log.Format != running.Log.Format, func() { eff.Log.Format = running.Log.Format })
	if !running.Capture.Disabled && !next.Capture.Disabled {
		restart("capture.backend", next.Capture.Backend != running.Capture.Backend,
			func() { eff.Capture.Backend = running.Capture.Backend })
		restart("capture.chainPrefix", next.Capture.ChainPrefix != running.Capture.ChainPrefix,
			func() { eff.Capture.ChainPrefix = running.Capture.ChainPrefix })
	}
	apply := func(name string, differ bool) {
		if differ {
			p.Apply = append(p.Apply, name)
		}
	}
	// A section off before and after changes nothing, whatever it holds.
	apply("capture", !(running.Capture.Disabled && eff.Capture.Disabled) && !reflect.DeepEqual(running.Capture, eff.Capture))
	apply("proxy", !reflect.DeepEqual(running.Proxy, eff.Proxy))
	apply("controlPlane", running.ControlPlane != eff.ControlPlane)
	apply("tunnel", (running.Tunnel.Enabled || eff.Tunnel.Enabled) && !reflect.DeepEqual(running.Tunnel, eff.Tunnel))
	apply("repair", (running.Repair.Enabled || eff.Repair.Enabled) && !sameRepair(running.Repair, eff.Repair))
	apply("interval", running.Interval != eff.Interval)
	apply("log.level", running.Log.Level != eff.Log.Level)
	p.Config = eff
	return p
}

// sameRepair compares repair settings; times compare as instants (two
// parses of one offset are different *time.Location values).
func sameRepair(a, b RepairConfig) bool {
	if !a.ReadySince.Equal(b.ReadySince) {
		return false
	}
	return a.Enabled == b.Enabled && a.Node == b.Node && a.Mode == b.Mode && a.Kubeconfig == b.Kubeconfig &&
		slices.Equal(a.ExcludeNamespaces, b.ExcludeNamespaces) && a.Ambient == b.Ambient &&
		a.DeleteRate == b.DeleteRate && a.DeleteBurst == b.DeleteBurst
}
