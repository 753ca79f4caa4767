// Package config owns baremesh's canonical configuration model: the Config
// envelope (kind, name, namespace, labels, annotations, resource version,
// source and a typed istio.io/api spec), the schema registry of the kinds
// and API versions baremesh accepts, decoding of Kubernetes-style documents
// into Configs, validation with Istio's rules, and the mesh config.
//
// It imports nothing of baremesh outside core.
package config
