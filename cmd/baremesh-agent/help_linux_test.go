package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestHelp: help and --help list every command and exit 0 without starting
// the agent; --version prints the version; an unknown command lists what
// exists and exits 2.
func TestHelp(t *testing.T) {
	for _, arg := range []string{"help", "--help", "-h"} {
		var out, errb bytes.Buffer
		if code := mainProcess([]string{arg}, &out, &errb); code != 0 {
			t.Errorf("%s: exit %d: %s", arg, code, errb.String())
		}
		for _, c := range []string{"run", "uninstall", "cni install", "cni uninstall", "cni repair", "tunnel up", "tunnel down", "tunnel run", "version"} {
			if !strings.Contains(out.String(), "\n  "+c+" ") {
				t.Errorf("%s lacks %q:\n%s", arg, c, out.String())
			}
		}
	}
	var out, errb bytes.Buffer
	if code := mainProcess([]string{"--version"}, &out, &errb); code != 0 || strings.TrimSpace(out.String()) == "" {
		t.Errorf("--version: exit %d %q", code, out.String())
	}
	if code := mainProcess([]string{"frobnicate"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown command "frobnicate"`) || !strings.Contains(errb.String(), "tunnel run") {
		t.Errorf("unknown: exit %d %q", code, errb.String())
	}
}

// TestManPage: packaging/man/baremesh-agent.8 has an entry for every
// command the help lists.
func TestManPage(t *testing.T) {
	b, err := os.ReadFile("../../packaging/man/baremesh-agent.8")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(agentUsage, "\n") {
		if f := strings.Fields(line); strings.HasPrefix(line, "  ") && len(f) > 1 {
			cmd := strings.Join(f[:2], " ")
			if f[1] != strings.ToLower(f[1]) || (f[0] != "cni" && f[0] != "tunnel") {
				cmd = f[0]
			}
			n++
			if !strings.Contains(string(b), ".B "+cmd+"\n") {
				t.Errorf("baremesh-agent.8 has no entry for %q", cmd)
			}
		}
	}
	if n < 10 {
		t.Errorf("found %d commands in the usage, want 10", n)
	}
}
