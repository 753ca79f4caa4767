// Command baremeshctl is baremesh's command-line tool.
//
//	baremeshctl validate [--max-file-size N] [--max-documents N] [--max-nodes N] DIR|FILE...
//
// checks config offline with the daemon's reader, parser, rules and
// limits (defaults as baremeshd's), and exits 1 on problems.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/baremesh/baremesh/internal/validate"
	"github.com/baremesh/baremesh/sources/file"
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
		fs := flag.NewFlagSet("validate", flag.ContinueOnError)
		fs.SetOutput(stderr)
		var lim file.Limits
		fs.Int64Var(&lim.MaxFileSize, "max-file-size", file.DefaultMaxFileSize, "largest config file, bytes (baremeshd maxFileSize)")
		fs.IntVar(&lim.MaxDocuments, "max-documents", file.DefaultMaxDocuments, "most resources in one file (baremeshd maxDocuments)")
		fs.IntVar(&lim.MaxNodes, "max-nodes", file.DefaultMaxNodes, "most YAML nodes in one resource (baremeshd maxNodes)")
		if err := fs.Parse(args[1:]); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			fmt.Fprintln(stderr, "usage: baremeshctl validate [--max-file-size N] [--max-documents N] [--max-nodes N] DIR|FILE...")
			return 2
		}
		return validate.Main(fs.Args(), lim, stdout, stderr)
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
}
