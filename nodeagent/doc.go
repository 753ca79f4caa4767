// Package nodeagent is the root of the code that runs on every mesh host:
// traffic capture (iptables), the local reconciler and the host agent.
//
// Nothing under nodeagent imports another tree of this module except
// internal/version; the agent talks to the control plane only over the wire.
package nodeagent
