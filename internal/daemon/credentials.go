package daemon

import (
	"context"
	"fmt"
	"time"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/push"
	credsrc "github.com/baremesh/baremesh/sources/credentials"
	"github.com/baremesh/baremesh/xdsserver/gen/scope"
)

// credentialsRescan is how often the credentials directory is re-read
// besides its watch events.
const credentialsRescan = 30 * time.Second

// startCredentials reads the gateway credentials before the first
// snapshot, then watches them (README "Gateway credentials").
func (d *Daemon) startCredentials(ctx context.Context, goRun func(func())) {
	if d.cfg.CredentialsDir == "" {
		return
	}
	log := d.log.With("component", "credentials")
	if set, err := credsrc.Read(d.cfg.CredentialsDir); err != nil {
		log.Warn("credentials: cannot read the directory; gateways get no credentials until it can be read", "err", err)
	} else {
		d.pipeline.SetCredentials(set)
	}
	goRun(func() { credsrc.Watch(ctx, d.cfg.CredentialsDir, credentialsRescan, log, d.pipeline.SetCredentials) })
}

// credentialProblem is a credential that cannot be served, or a Gateway
// server whose credential a connected gateway cannot get (so its
// listener chain is left out of that gateway's LDS), on /debug/configz.
type credentialProblem struct {
	Credential string `json:"credential"`
	Gateway    string `json:"gateway,omitempty"`
	Server     string `json:"server,omitempty"`
	// Proxy is the connected gateway the server is left out for.
	Proxy string `json:"proxy,omitempty"`
	Error string `json:"error"`
}

// credentialProblems lists the credentials of pc that cannot be served
// and, for each connected gateway proxy, the servers of its Gateways it
// cannot serve, by the rule its listeners are built with
// (scope.GatewayServer.CredentialProblem), so the page says what is
// served.
func credentialProblems(pc *push.PushContext, proxies []*model.Proxy) []credentialProblem {
	out := []credentialProblem{}
	if pc == nil {
		return out
	}
	for _, c := range pc.Credentials.Problems() {
		out = append(out, credentialProblem{Credential: c.Name, Error: c.Err.Error()})
	}
	for _, p := range proxies {
		if p.Type != model.Router {
			continue
		}
		ports, byPort := scope.GatewayServers(pc, p)
		for _, port := range ports {
			for _, s := range byPort[port] {
				if err := s.CredentialProblem(pc.Credentials, p); err != nil {
					out = append(out, credentialProblem{Credential: s.Server.GetTls().GetCredentialName(), Gateway: s.Gateway,
						Server: serverName(s.Server, port), Proxy: p.ID, Error: err.Error() + "; the server is left out of the gateway's listeners"})
				}
			}
		}
	}
	return out
}

// serverName names a Gateway server on the page: its name, else its
// port's name, else its port number.
func serverName(s *networking.Server, port uint32) string {
	if s.GetName() != "" {
		return s.GetName()
	}
	if s.GetPort().GetName() != "" {
		return s.GetPort().GetName()
	}
	return fmt.Sprintf("port %d", port)
}
