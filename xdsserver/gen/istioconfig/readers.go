package istioconfig

import (
	"fmt"
	"strings"

	"github.com/baremesh/baremesh/core/model"
)

// Readers says who may read the Istio config over MCP: the whole
// aggregate (every namespace's policies, services and workloads) goes
// to a reader, so, as istiod's API generator with
// ENABLE_XDS_API_GENERATOR_AUTH (its default), only authenticated
// control-plane identities may: those of the mesh's root namespace
// (meshConfig.rootNamespace, istio-system by default), and those listed.
type Readers struct {
	// Identities are further readers, "NAMESPACE/SERVICE_ACCOUNT" or
	// "NAMESPACE/*" for every service account of a namespace.
	Identities []string
	// AllowPlaintext lets unauthenticated streams (the plaintext,
	// loopback xdsAddr) read: an explicit opt-in, as istiod's
	// ENABLE_XDS_API_GENERATOR_AUTH=false.
	AllowPlaintext bool
}

// Check names the first malformed identity.
func (r Readers) Check() error {
	for _, id := range r.Identities {
		ns, sa, ok := strings.Cut(id, "/")
		if !ok || ns == "" || sa == "" || strings.Contains(sa, "/") {
			return fmt.Errorf("%q is not NAMESPACE/SERVICE_ACCOUNT or NAMESPACE/*", id)
		}
	}
	return nil
}

// Refusal is why a proxy may not read: Reason is a short label for
// metrics (unauthenticated, not_a_reader).
type Refusal struct{ reason, detail string }

func (r *Refusal) Error() string  { return r.detail }
func (r *Refusal) Reason() string { return r.reason }

// Authorize says whether p may read the Istio config; rootNamespace is
// the mesh's ("" means istio-system).
func (r Readers) Authorize(p *model.Proxy, rootNamespace string) error {
	id := p.Identity
	if id == nil {
		if r.AllowPlaintext {
			return nil
		}
		return &Refusal{"unauthenticated", "proxy " + p.ID + " is not authenticated: Istio config is served over MCP only on the TLS port to a control-plane identity (or set allowPlaintextMCPReaders)"}
	}
	if rootNamespace == "" {
		rootNamespace = "istio-system"
	}
	if id.Namespace == rootNamespace {
		return nil
	}
	for _, a := range r.Identities {
		ns, sa, _ := strings.Cut(a, "/")
		if ns == id.Namespace && (sa == "*" || sa == id.ServiceAccount) {
			return nil
		}
	}
	return &Refusal{"not_a_reader", fmt.Sprintf("proxy %s is authenticated as %s, which is neither of the root namespace %s nor in mcpReaders", p.ID, id.SPIFFEID(), rootNamespace)}
}
