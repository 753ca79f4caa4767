package onboard

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandsAsANewUserTriesThem: the identity commands say what to do
// when used as a new user first tries them (issue #26 item 5): flags
// before the subcommand work; a missing config file is named with the
// fix, not read as an empty config ("WorkloadGroup ... not found in []")
// nor as the packaged state directory (token list made
// /var/lib/baremesh/tokens/tokens.lock); listing an empty state
// directory creates nothing; -h exits 0 with every flag and examples;
// registration is on unless turned off.
func TestCommandsAsANewUserTriesThem(t *testing.T) {
	state := t.TempDir()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "baremesh.yaml")
	must(t, os.WriteFile(cfg, []byte("stateDir: "+state+"\n"), 0o644))

	// token --config F create: the flag before the verb.
	rc, tok, stderr := ctl("token", "--config", cfg, "create", "--namespace", "a", "--service-account", "b")
	if rc != 0 || !strings.HasPrefix(tok, "bmt1.") {
		t.Fatalf("token --config F create: %d %q %q", rc, tok, stderr)
	}
	if rc, list, _ := ctl("token", "--state-dir", state, "list"); rc != 0 || !strings.Contains(list, strings.Split(tok, ".")[1]) {
		t.Fatalf("token --state-dir D list: %d\n%s", rc, list)
	}

	// No config file: the error names the file and the flag.
	missing := filepath.Join(dir, "nope.yaml")
	for _, args := range [][]string{
		{"token", "list", "--config", missing},
		{"vm", "bootstrap", "--config", missing, "--namespace", "bookinfo", "--group", "reviews", "--out", filepath.Join(dir, "out")},
	} {
		if rc, _, stderr := ctl(args...); rc != 1 || !strings.Contains(stderr, "config file "+missing+" not found: pass --config FILE") {
			t.Errorf("%v: %d %q", args, rc, stderr)
		}
	}
	// A config without configDirs: vm bootstrap says so.
	if rc, _, stderr := ctl("vm", "bootstrap", "--config", cfg, "--namespace", "bookinfo", "--group", "reviews", "--out", filepath.Join(dir, "out")); rc != 1 ||
		!strings.Contains(stderr, "WorkloadGroup bookinfo/reviews: the config names no configDirs") {
		t.Errorf("no configDirs: %d %q", rc, stderr)
	}

	// Listing a state directory without tokens creates nothing.
	empty := t.TempDir()
	if rc, _, stderr := ctl("token", "list", "--state-dir", empty); rc != 0 || !strings.Contains(stderr, "no tokens") {
		t.Errorf("token list on an empty state dir: %d %q", rc, stderr)
	}
	if rc, _, stderr := ctl("token", "revoke", "0123456789abcdef", "--state-dir", empty); rc != 1 || !strings.Contains(stderr, "does not exist") {
		t.Errorf("token revoke on an empty state dir: %d %q", rc, stderr)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Errorf("token list/revoke created %v in the state directory", ents)
	}

	// -h: exit 0, every flag, examples.
	for _, tc := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"vm", "bootstrap", "-h"}, []string{"-autoregister", "-envoy", "-ttl", "-config", "examples:", "baremeshctl vm bootstrap --config /etc/baremesh/baremesh.yaml"}},
		{[]string{"token", "create", "--help"}, []string{"-service-account", "-uses", "examples:"}},
		{[]string{"token", "revoke", "-h"}, []string{"usage: baremeshctl token revoke ID", "-state-dir"}},
	} {
		rc, out, errOut := ctl(tc.args...)
		if rc != 0 {
			t.Errorf("%v: exit %d", tc.args, rc)
		}
		for _, w := range tc.wants {
			if !strings.Contains(out+errOut, w) {
				t.Errorf("%v lacks %q:\n%s%s", tc.args, w, out, errOut)
			}
		}
	}
}
