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
	if len(args) == 0 || isHelp(args[0]) {
		fmt.Fprintln(e.Stderr, "usage: baremeshctl validate [--max-file-size N] [--max-documents N] [--max-nodes N] DIR|FILE...")
		return helpCode(args)
	}
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	var lim file.Limits
	fs.Int64Var(&lim.MaxFileSize, "max-file-size", file.DefaultMaxFileSize, "largest config file, bytes (baremeshd maxFileSize)")
	fs.IntVar(&lim.MaxDocuments, "max-documents", file.DefaultMaxDocuments, "most resources in one file (baremeshd maxDocuments)")
	fs.IntVar(&lim.MaxNodes, "max-nodes", file.DefaultMaxNodes, "most YAML nodes in one resource (baremeshd maxNodes)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(e.Stderr, "usage: baremeshctl validate [--max-file-size N] [--max-documents N] [--max-nodes N] DIR|FILE...")
		return 2
	}
	return validate.Main(fs.Args(), lim, e.Stdout, e.Stderr)
}
