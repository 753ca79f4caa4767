package reconcile

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
)

// ErrVersionSkew is wrapped when a peer is more than one minor version
// away from the agent (or on another major version).
var ErrVersionSkew = errors.New("version skew")

var versionRE = regexp.MustCompile(`v?(\d+)\.(\d+)(?:\.(\d+))?`)

// ParseVersion finds the first MAJOR.MINOR[.PATCH] in s (for example in
// "envoy  version: 1a2b/1.31.2/Clean/RELEASE").
func ParseVersion(s string) (major, minor int, err error) {
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, fmt.Errorf("no version number in %q", s)
	}
	major, _ = strconv.Atoi(m[1])
	minor, _ = strconv.Atoi(m[2])
	return major, minor, nil
}

// CheckSkew returns an error wrapping ErrVersionSkew when other is on a
// different major version or more than one minor version from agent.
func CheckSkew(agent, other string) error {
	amaj, amin, err := ParseVersion(agent)
	if err != nil {
		return fmt.Errorf("agent version: %w", err)
	}
	omaj, omin, err := ParseVersion(other)
	if err != nil {
		return err
	}
	if amaj != omaj || amin-omin > 1 || omin-amin > 1 {
		return fmt.Errorf("%w: %d.%d is more than one minor version from the agent's %d.%d", ErrVersionSkew, omaj, omin, amaj, amin)
	}
	return nil
}
