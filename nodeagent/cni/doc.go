// Package cni is baremesh's chained CNI plugin: a pure decision from a pod,
// its namespace and the plugin configuration to a capture decision with
// istio-cni's semantics (decide.go), and the plugin shell that reads the
// pod from the Kubernetes API, enters the pod's network namespace and
// applies the rules with nodeagent/iptables (plugin.go, _linux.go files).
//
// It must not import core/, sources/, xdsserver/ or cmd/.
package cni
