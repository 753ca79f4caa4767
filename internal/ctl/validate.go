package ctl

import (
	"flag"
	"fmt"

	"github.com/baremesh/baremesh/internal/validate"
	"github.com/baremesh/baremesh/sources/file"
)

// validateCmd checks config offline with the daemon's reader, parser,
// rules and limits (defaults as baremeshd's; the flags mirror
// baremesh.yaml's maxFileSize, maxDocuments and maxNodes).
func validateCmd(e *Env, args []string) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: baremeshctl validate [--max-file-size N] [--max-documents N] [--max-nodes N] DIR|FILE...\n\nflags:")
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), "\nexamples:\n  baremeshctl validate /etc/baremesh/conf.d\n  baremeshctl validate --max-file-size 4194304 /etc/baremesh/conf.d/big.yaml\n")
	}
	var lim file.Limits
	fs.Int64Var(&lim.MaxFileSize, "max-file-size", file.DefaultMaxFileSize, "largest config file, bytes (baremeshd maxFileSize)")
	fs.IntVar(&lim.MaxDocuments, "max-documents", file.DefaultMaxDocuments, "most resources in one file (baremeshd maxDocuments)")
	fs.IntVar(&lim.MaxNodes, "max-nodes", file.DefaultMaxNodes, "most YAML nodes in one resource (baremeshd maxNodes)")
	if len(args) > 0 && isHelp(args[0]) {
		fs.SetOutput(e.Stdout)
		fs.Usage()
		return 0
	}
	if err := fs.Parse(args); err != nil {
		return exitParse(err)
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	return validate.Main(fs.Args(), lim, e.Stdout, e.Stderr)
}
