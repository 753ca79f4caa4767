package identity

import (
	"fmt"

	"github.com/baremesh/baremesh/core/model"
)

// CheckNode checks what an authenticated proxy claims in its node
// against the identity it proved, as istiod's checkConnectionIdentity:
// the node's namespace must be the identity's (a proxy reads only its
// own namespace's config), and a SERVICE_ACCOUNT in its metadata must be
// the identity's service account (auto-registration, SDS and telemetry
// read it). An unauthenticated proxy (p.Identity nil) claims what it
// likes: nothing it claims is trusted, and what it may read is decided
// elsewhere. The error names the node, the claim and the identity.
func CheckNode(p *model.Proxy) error {
	id := p.Identity
	if id == nil {
		return nil
	}
	if p.Namespace != id.Namespace {
		return fmt.Errorf("node %q is in namespace %q but authenticated as %s", p.ID, p.Namespace, id.SPIFFEID())
	}
	if p.ServiceAccount != "" && p.ServiceAccount != id.ServiceAccount {
		return fmt.Errorf("node %q claims service account %q (SERVICE_ACCOUNT) but authenticated as %s", p.ID, p.ServiceAccount, id.SPIFFEID())
	}
	return nil
}
