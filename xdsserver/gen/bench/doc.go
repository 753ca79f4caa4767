// Package bench holds the generator benchmarks over Istio's own xDS
// benchmark configurations (../shared/bench/istio beside the repository), for comparison
// with istiod's figures. It has no non-test code.
package bench
