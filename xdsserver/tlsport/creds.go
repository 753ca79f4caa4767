package tlsport

import (
	"context"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/baremesh/baremesh/core/identity"
)

// CredentialsFromContext takes what a gRPC call offers as proof of
// identity: the TLS peer's certificates (as presented) and the bearer
// token of the "authorization" header, as Istio's agent sends it
// ("Bearer <token>"), and the cluster ID of the "clusterid" header (where
// a Kubernetes token is reviewed; as istiod, one value only). The xDS
// server's authenticator seam uses it too.
func CredentialsFromContext(ctx context.Context) identity.Credentials {
	var c identity.Credentials
	if p, ok := peer.FromContext(ctx); ok {
		if p.Addr != nil {
			c.Peer = p.Addr.String()
		}
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			c.PeerCertificates = ti.State.PeerCertificates
		}
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		for _, v := range md.Get("authorization") {
			if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
				c.BearerToken = strings.TrimSpace(v[7:])
				break
			}
		}
		if v := md.Get("clusterid"); len(v) == 1 {
			c.ClusterID = v[0]
		}
	}
	return c
}
