//go:build !linux

// Command baremesh-agent is the host agent; it runs on Linux only.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "baremesh-agent: Linux only (iptables and netlink)")
	os.Exit(1)
}
