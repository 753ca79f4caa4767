// Command baremeshctl is baremesh's command-line tool.
//
//	baremeshctl validate DIR|FILE...   check config offline, exit 1 on problems
//	baremeshctl token create|list|revoke   join tokens (internal/onboard)
//	baremeshctl vm bootstrap ...           a VM's Istio agent files (internal/onboard)
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/baremesh/baremesh/internal/onboard"
	"github.com/baremesh/baremesh/internal/validate"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "validate":
		if len(args) < 2 {
			fmt.Fprintln(stderr, "usage: baremeshctl validate DIR|FILE...")
			return 2
		}
		return validate.Main(args[1:], stdout, stderr)
	case "token", "vm":
		return onboard.Main(args, stdout, stderr)
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "baremeshctl: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: baremeshctl validate DIR|FILE...   validate config offline (same parser and rules as baremeshd)")
	fmt.Fprint(w, onboard.Usage)
}
