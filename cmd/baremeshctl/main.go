// Command baremeshctl is baremesh's command-line tool; its commands are
// the table in internal/ctl (baremeshctl --help lists them).
package main

import (
	"os"

	"github.com/baremesh/baremesh/internal/ctl"
)

func main() { os.Exit(ctl.Main(os.Args[1:], os.Stdout, os.Stderr)) }
