package scope

import (
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/credentials"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/gen/sds"
)

// CredentialProblem is why gateway proxy p cannot terminate TLS for s
// with the credential s names; nil when it can, or when s terminates no
// TLS with a credentialName (plain HTTP, passthrough, TCP). It is the one
// rule for both places that judge it: the gateway's listeners leave a
// server with a problem out (lds), and /debug/configz names the problem
// for each connected gateway. A credential is read in the namespace SDS
// serves p (sds.Namespace: its identity's), and only for an
// authenticated p (sds.Authorize), not in the Gateway resource's
// namespace.
func (s GatewayServer) CredentialProblem(set *credentials.Set, p *model.Proxy) error {
	t := s.Server.GetTls()
	if !strings.HasPrefix(s.RouteName, "https.") || t.GetCredentialName() == "" {
		return nil
	}
	if err := sds.Authorize(p); err != nil {
		return err
	}
	return set.Usable(sds.Namespace(p), t.GetCredentialName(), t.GetMode() == networking.ServerTLSSettings_MUTUAL)
}
