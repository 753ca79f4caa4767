package ctl

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"reviews-vm-1.bookinfo":      "reviews-vm-1.bookinfo",
		"bad\x1b]0;owned\x07\x1b[2J": `bad\x1b]0;owned\x07\x1b[2J`,
		"tab\there\r\nline":          `tab\x09here\x0d\x0aline`,
		"ünïcode ok":                 "ünïcode ok",
		"bidi\u202eevil":             `bidi\u202eevil`,
		"invalid\xffutf8":            `invalid\xffutf8`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestProxyStatusEscapesNodeIDs: a node ID with terminal escape
// sequences, a tab and a newline reaches proxy-status's table escaped, on
// one row, its columns in place.
func TestProxyStatusEscapesNodeIDs(t *testing.T) {
	ps := []proxyStatusJSON{{ID: "sidecar~10.0.0.1~evil\x1b[31m\tx\ny.ns~ns.svc.cluster.local", Type: "sidecar", Peer: "10.0.0.1:1"}}
	printableStatus(ps)
	var b bytes.Buffer
	writeStatus(&b, ps, time.Now())
	out := b.String()
	if strings.ContainsAny(out, "\x1b\t") || strings.Count(out, "\n") != 2 {
		t.Fatalf("raw control characters or extra lines in:\n%q", out)
	}
	if !strings.Contains(out, `evil\x1b[31m\x09x\x0ay.ns`) {
		t.Fatalf("escaped name missing:\n%s", out)
	}
}
