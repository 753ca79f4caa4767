// Package gen defines what every xDS generator shares: the reading of a
// proxy (core/model.Proxy) from its xDS node, the Input a generator
// receives and the Resource it returns, and the Generator signature. One sub-package per xDS type (lds, rds,
// cds, eds) holds the generators.
//
// Generators are pure: snapshot and proxy in, resources out; no I/O, no
// goroutines, no clock. The type URLs and every other trait of a type
// are declared in xdsserver/xdstype. gen imports core only, never
// sources.
package gen

import (
	"google.golang.org/protobuf/proto"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
)

// Input is everything a generator may read.
type Input struct {
	Push  *push.PushContext
	Proxy *model.Proxy
	// Names are the resources the proxy subscribed to; empty means all
	// (a wildcard subscription). LDS and CDS are usually wildcard for
	// Envoy; RDS and EDS are always named; proxyless gRPC names all.
	Names []string
	// Request says what changed, nil for a proxy's first request.
	Request *push.Request
	// Part narrows an Envoy sidecar's LDS or CDS to one side of it (the
	// zero PartAll is all of it): a fleet of VMs that serve different
	// services shares the side that does not read what a VM serves.
	Part Part
}

// Part is a side of an Envoy sidecar's LDS or CDS: PartAll's resources
// are PartShared's and PartInbound's. Other proxies have no sides: all
// of theirs is PartShared, none PartInbound.
type Part uint8

const (
	PartAll Part = iota
	// PartShared is every resource that does not read the proxy's
	// inbound side (scope.Inbound): outbound listeners and clusters, the
	// passthrough and blackhole clusters.
	PartShared
	// PartInbound is those that do: the virtualInbound listener, the
	// inbound|PORT|| clusters.
	PartInbound
)

// Resource is one generated resource.
type Resource struct {
	Name     string
	Resource proto.Message
}

// Generator builds the resources of one type. Errors are wrapped with the
// generator's name.
type Generator func(in Input) ([]Resource, error)
