package main

import (
	"strings"
	"testing"
)

// TestTunnelCommand: `tunnel` wants up, down or run; a config the tunnel
// refuses is an error naming the field, before anything is touched (what
// the tunnel builds is tested in nodeagent/agent, TestStandaloneTunnel).
func TestTunnelCommand(t *testing.T) {
	if code, _, stderr := runMain(t, "tunnel", "sideways"); code != 2 || !strings.Contains(stderr, "up|down|run") {
		t.Errorf("unknown: exit %d, %s", code, stderr)
	}
	if code, _, stderr := runMain(t, "tunnel", "up", "-config", writeConfig(t, "kind: gre\n")); code != 1 || !strings.Contains(stderr, "tunnel: kind") {
		t.Errorf("bad config: exit %d, %s", code, stderr)
	}
}
