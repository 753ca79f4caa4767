package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestManual: --help lists the CNI commands and exits 0, --version prints
// the version, anything else says what exists and exits 2.
func TestManual(t *testing.T) {
	var out, errb bytes.Buffer
	if code := manual([]string{"--help"}, &out, &errb); code != 0 {
		t.Errorf("--help: exit %d", code)
	}
	for _, c := range []string{"ADD", "DEL", "CHECK", "VERSION", "--version"} {
		if !strings.Contains(out.String(), c) {
			t.Errorf("--help lacks %s:\n%s", c, out.String())
		}
	}
	out.Reset()
	if code := manual([]string{"--version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "baremesh-cni ") {
		t.Errorf("--version: exit %d, %q", code, out.String())
	}
	errb.Reset()
	if code := manual([]string{"add"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown argument "add"`) || !strings.Contains(errb.String(), "CNI_COMMAND") {
		t.Errorf("unknown: exit %d, %q", code, errb.String())
	}
}

// TestManPage: packaging/man/baremesh-cni.8 has every CNI command.
func TestManPage(t *testing.T) {
	b, err := os.ReadFile("../../packaging/man/baremesh-cni.8")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"ADD", "DEL", "CHECK", "VERSION"} {
		if !strings.Contains(usage, "  "+c+" ") || !strings.Contains(string(b), ".B "+c+"\n") {
			t.Errorf("%s is missing from the usage or the man page", c)
		}
	}
}
