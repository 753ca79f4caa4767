package main

import (
	"bytes"
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
