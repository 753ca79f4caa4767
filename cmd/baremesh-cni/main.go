// Command baremesh-cni is the chained CNI plugin that sets up traffic
// capture in each pod's network namespace (see nodeagent/cni).
package main

import (
	"github.com/baremesh/baremesh/internal/version"
	"github.com/baremesh/baremesh/nodeagent/cni"
)

func main() { cni.Main("baremesh-cni " + version.Version) }
