package ads

import (
	"net"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/baremesh/baremesh/core/identity"
	"github.com/baremesh/baremesh/core/model"
)

// authorizeNode is the authorization rule beside the stream, as istiod's
// (pilot/pkg/xds/auth.go): once the first request's node is parsed, what
// it claims is checked against the identity the stream authenticated as
// (core/identity.CheckNode: the node's namespace is the identity's, a
// SERVICE_ACCOUNT in its metadata is the identity's), before the connect
// hook sees the proxy and before anything is generated. It is the
// server's own rule, not a hook's: no wiring can leave it out. A stream
// without an identity passes; what it may read is Hooks.Authorize's.
func (s *Server) authorizeNode(p *model.Proxy, peer net.Addr) error {
	if err := identity.CheckNode(p); err != nil {
		s.log.Warn("proxy refused: its node claims more than its identity", "proxy", p.ID, "peer", peer, "err", err)
		return status.Error(codes.PermissionDenied, err.Error())
	}
	return nil
}
