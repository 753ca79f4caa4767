package ctl

import (
	"fmt"
	"strings"
	"unicode"
)

// printable escapes what a terminal would act on: control characters
// (escape sequences, carriage returns, newlines, tabs that would shift
// table columns) and other unprintable runes become \xNN or \uNNNN. A
// node ID or NACK message is whatever a proxy sent; it must not reach a
// terminal raw.
func printable(s string) string {
	clean := true
	for _, r := range s {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == unicode.ReplacementChar:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsPrint(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// printableStatus escapes every free-text field of a /debug/syncz answer
// (see printable) in place.
func printableStatus(ps []proxyStatusJSON) {
	for i := range ps {
		p := &ps[i]
		p.ID, p.Conn, p.Peer, p.Type = printable(p.ID), printable(p.Conn), printable(p.Peer), printable(p.Type)
		p.Namespace, p.Identity = printable(p.Namespace), printable(p.Identity)
		for j := range p.IPs {
			p.IPs[j] = printable(p.IPs[j])
		}
		for j := range p.Types {
			t := &p.Types[j]
			t.Type, t.SentVersion, t.AckedVer, t.GenError = printable(t.Type), printable(t.SentVersion), printable(t.AckedVer), printable(t.GenError)
			if t.LastNack != nil {
				t.LastNack.Version, t.LastNack.Message = printable(t.LastNack.Version), printable(t.LastNack.Message)
			}
		}
	}
}
