package scope

import (
	"fmt"
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
//
// Every credential of credentialNames (or the one credentialName) must
// hold a certificate and key; a MUTUAL or OPTIONAL_MUTUAL server needs
// the CA of caCertCredentialName, else of the first credential.
func (s GatewayServer) CredentialProblem(set *credentials.Set, p *model.Proxy) error {
	t := s.Server.GetTls()
	creds := CredentialNames(t)
	if !strings.HasPrefix(s.RouteName, "https.") || len(creds) == 0 {
		return nil
	}
	if err := sds.Authorize(p); err != nil {
		return err
	}
	mutual := t.GetMode() == networking.ServerTLSSettings_MUTUAL || t.GetMode() == networking.ServerTLSSettings_OPTIONAL_MUTUAL
	caCred := t.GetCaCertCredentialName()
	for i, c := range creds {
		if err := set.Usable(sds.Namespace(p), c, mutual && i == 0 && caCred == ""); err != nil {
			return err
		}
	}
	if mutual && caCred != "" {
		c, err := set.Lookup(sds.Namespace(p), caCred)
		if err != nil {
			return err
		}
		if len(c.CA) == 0 {
			return fmt.Errorf("credential %q (caCertCredentialName) has no %s", caCred, credentials.CAFile)
		}
	}
	return nil
}

// CredentialNames are the credentials a server's certificates come
// from, as istiod reads them: credentialNames (say an RSA and an ECDSA
// certificate) when set, else credentialName; nil for none.
func CredentialNames(t *networking.ServerTLSSettings) []string {
	if names := t.GetCredentialNames(); len(names) > 0 {
		return names
	}
	if n := t.GetCredentialName(); n != "" {
		return []string{n}
	}
	return nil
}
