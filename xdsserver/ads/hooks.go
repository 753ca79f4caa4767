package ads

import (
	"context"
	"net"

	statuspb "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// Hooks are the server's connection hooks, where controllers beside the
// server (auto-registration, health, the CA) attach. Each is optional.
// They are called on the stream's goroutines and must return quickly;
// the proxy they receive must not be altered.
type Hooks struct {
	// Authenticate is called once at stream start, before the first
	// request is read, with the stream's context (peer, TLS state,
	// metadata). It returns the caller's identity, or nil for an
	// unauthenticated caller; an error refuses the stream (with the
	// error's gRPC status, else Unauthenticated). Nil: every caller is
	// unauthenticated.
	Authenticate func(ctx context.Context) (*model.Identity, error)
	// OnConnect is called once the first request's node is parsed and
	// before anything is generated, with the peer address and the
	// identity Authenticate returned (also p.Identity). An error refuses
	// the stream: the client sees the error's gRPC status (else
	// PermissionDenied).
	OnConnect func(ctx context.Context, p *model.Proxy, peer net.Addr, id *model.Identity) error
	// OnDisconnect is called once a connection OnConnect accepted ends;
	// reason is nil when the client closed the stream.
	OnDisconnect func(p *model.Proxy, reason error)
	// OnReport receives each request of a type the server does not
	// generate (Istio's "istio.io/health", say), SotW or Delta. Such a
	// request is neither answered nor NACKed.
	OnReport func(p *model.Proxy, r Report)
	// Authorize is asked before an uncached type (SDS, Istio config over
	// MCP) is generated for proxy p: an error means p may not read t and
	// gets nothing of it; the refusal is logged once per connection and
	// type and counted, with its reason when the error is Reasoned
	// (authz.go). Nil: every proxy may read every type.
	Authorize func(p *model.Proxy, t *xdstype.Type) error
}

// Report is a request of a type the server does not generate.
type Report struct {
	TypeURL       string
	VersionInfo   string
	ResponseNonce string
	// ResourceNames are the names requested (Delta: subscribed).
	ResourceNames []string
	// ErrorDetail is set when the client reports an error (an unhealthy
	// workload, for istio.io/health).
	ErrorDetail *statuspb.Status
	Delta       bool
}
