package tunnel

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// EnrolChain is the mangle chain on the node that holds one rule per
// enrolled ambient pod ("-s IP/32 -j MARK --set-xmark M/M"). The CNI
// plugin adds and removes its rules (Enroller); the tunnel only creates it
// and jumps to it. Its name starts with neither the tunnel's prefix
// (BMTUN) nor the host-mode capture's (BAREMESH): both appliers own, flush
// and remove every PREFIX_* chain, and enrolments must survive a tunnel
// restart or a re-apply.
const EnrolChain = "BMAMBIENT_PODS"

// DefaultMark is the node-side mark of redirected packets (Config.Mark's
// default); an Enroller must use the tunnel's mark.
const DefaultMark uint32 = 0x100

// enrolRule is the rule spec (without "-A CHAIN") that enrols ip.
func enrolRule(ip netip.Addr, mark uint32) []string {
	return []string{"-s", netip.PrefixFrom(ip, ip.BitLen()).String(), "-j", "MARK", "--set-xmark", fmt.Sprintf("%#x/%#x", mark, mark)}
}

// parseEnrolled reads the sources of the enrolment rules from
// "iptables -S EnrolChain" output. Pure.
func parseEnrolled(out string) []netip.Addr {
	var ips []netip.Addr
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "-A" || f[1] != EnrolChain || f[2] != "-s" {
			continue
		}
		if p, err := netip.ParsePrefix(f[3]); err == nil {
			ips = append(ips, p.Addr())
		} else if a, err := netip.ParseAddr(f[3]); err == nil {
			ips = append(ips, a)
		}
	}
	return ips
}

// An owner tags an enrolment rule with the pod's sandbox: its CNI
// container ID and network namespace path, as the comment
// "bm:CONTAINERID@NETNS". DEL without a prevResult (CNI before 0.4.0)
// finds the pod's rules by container ID, and SweepStale removes those
// whose namespace is gone (a pod deleted without a DEL).
const ownerPrefix = "bm:"

var ownerRE = regexp.MustCompile(`^[A-Za-z0-9_.:/-]{1,200}$`)

// Owner returns the owner tag of a pod sandbox.
func Owner(containerID, netns string) (string, error) {
	if !ownerRE.MatchString(containerID) || (netns != "" && !ownerRE.MatchString(netns)) {
		return "", fmt.Errorf("enrolment owner %q@%q: unexpected characters", containerID, netns)
	}
	return ownerPrefix + containerID + "@" + netns, nil
}
