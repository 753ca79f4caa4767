package ctl

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/internal/daemonconfig"
)

// roff escapes "-" as "\-" in the man pages.
func roff(s string) string { return strings.ReplaceAll(s, "-", `\-`) }

func manPage(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../../packaging/man/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestManPages: the packaged man pages describe every command the
// binaries' help lists (baremeshctl's table, baremeshd's usage and flags);
// baremesh-agent's and baremesh-cni's are checked next to their help in
// cmd/. A command added without its man page entry fails here.
func TestManPages(t *testing.T) {
	page := manPage(t, "baremeshctl.1")
	for _, v := range Verbs {
		if !regexp.MustCompile(`(?m)^\.BR? ` + regexp.QuoteMeta(roff(v.Name)) + `\b`).MatchString(page) {
			t.Errorf("baremeshctl.1 has no entry for %s", v.Name)
		}
	}
	page = manPage(t, "baremeshd.8")
	for _, m := range regexp.MustCompile(`baremeshd ([a-z-]+) `).FindAllStringSubmatch(daemonconfig.Usage, -1) {
		if !strings.Contains(page, ".B "+roff(m[1])+"\n") {
			t.Errorf("baremeshd.8 has no entry for the command %s", m[1])
		}
	}
	flags := regexp.MustCompile(`(?m)^  -([a-z-]+)`).FindAllStringSubmatch(flagHelp(t), -1)
	if len(flags) < 5 {
		t.Fatalf("found only %d flags in baremeshd -h", len(flags))
	}
	for _, m := range flags {
		if !strings.Contains(page, `.BI \-`+roff(m[1])+" ") && !strings.Contains(page, `.B \-`+roff(m[1])+"\n") {
			t.Errorf("baremeshd.8 has no entry for the flag -%s", m[1])
		}
	}
}

// flagHelp is baremeshd --help's flag list.
func flagHelp(t *testing.T) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = w
	_, _, _ = daemonconfig.Load([]string{"-h"})
	os.Stderr = old
	w.Close()
	b := make([]byte, 1<<16)
	n, _ := r.Read(b)
	if !strings.Contains(string(b[:n]), "-xds-addr") {
		t.Fatalf("baremeshd -h printed no flags: %q", b[:n])
	}
	return string(b[:n])
}
