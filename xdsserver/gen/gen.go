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
}

// Resource is one generated resource.
type Resource struct {
	Name     string
	Resource proto.Message
}

// Generator builds the resources of one type. Errors are wrapped with the
// generator's name.
type Generator func(in Input) ([]Resource, error)
