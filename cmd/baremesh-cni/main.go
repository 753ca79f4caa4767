// Command baremesh-cni is the chained CNI plugin that sets up traffic
// capture in each pod's network namespace (see nodeagent/cni). The
// container runtime runs it with CNI_COMMAND set; by hand it answers
// --help and --version.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/baremesh/baremesh/internal/version"
	"github.com/baremesh/baremesh/nodeagent/cni"
)

func main() {
	if os.Getenv("CNI_COMMAND") == "" && len(os.Args) > 1 {
		os.Exit(manual(os.Args[1:], os.Stdout, os.Stderr))
	}
	cni.Main("baremesh-cni " + version.Version)
}

// usage is --help's text (and the man page's, baremesh-cni.8).
const usage = `usage: baremesh-cni (run by the container runtime, with CNI_COMMAND=ADD|DEL|CHECK|VERSION)
       baremesh-cni --help | --version

baremesh-cni is a chained CNI plugin: listed after the node's main plugin in
a conflist (baremesh-agent cni install writes it), it reads the pod's
annotations and sets up iptables capture (or enrolls the pod in the node
tunnel, ambient) inside the pod's network namespace. Its settings come from
the conflist entry on stdin; it logs to stderr at its logLevel.

commands (CNI_COMMAND):
  ADD      set up capture for a new pod and pass the previous result on
  DEL      remove what ADD set up (pod deleted)
  CHECK    verify a pod's capture is still in place
  VERSION  print the CNI protocol versions it speaks
`

// manual answers a person running the plugin by hand.
func manual(args []string, stdout, stderr io.Writer) int {
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprintf(stdout, "baremesh-cni %s: baremesh's CNI plugin.\n\n%s", version.Version, usage)
		return 0
	case "-version", "--version", "version":
		fmt.Fprintln(stdout, "baremesh-cni", version.Version)
		return 0
	}
	fmt.Fprintf(stderr, "baremesh-cni: unknown argument %q (the plugin takes none; the runtime sets CNI_COMMAND)\n%s", args[0], usage)
	return 2
}
