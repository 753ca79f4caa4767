package daemon

import (
	"context"
	"fmt"
	"time"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/push"
	credsrc "github.com/baremesh/baremesh/sources/credentials"
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
// server whose credentialName cannot be served (so its listener chain is
// left out), on /debug/configz.
type credentialProblem struct {
	Credential string `json:"credential"`
	Gateway    string `json:"gateway,omitempty"`
	Server     string `json:"server,omitempty"`
	Error      string `json:"error"`
}

// credentialProblems lists the credentials of pc that cannot be served
// and the Gateway servers that name a credential their gateway cannot
// get. A gateway's credentials are read in its proxy's namespace; this
// page judges by the Gateway resource's namespace, which is the same
// where gateways are deployed as Istio's are.
func credentialProblems(pc *push.PushContext) []credentialProblem {
	out := []credentialProblem{}
	if pc == nil {
		return out
	}
	for _, c := range pc.Credentials.Problems() {
		out = append(out, credentialProblem{Credential: c.Name, Error: c.Err.Error()})
	}
	for _, c := range pc.Configs(config.Gateway) {
		for i, s := range c.Spec.(*networking.Gateway).GetServers() {
			t := s.GetTls()
			if t.GetCredentialName() == "" || t.GetMode() == networking.ServerTLSSettings_PASSTHROUGH {
				continue
			}
			if err := pc.Credentials.Usable(c.Namespace, t.GetCredentialName(), t.GetMode() == networking.ServerTLSSettings_MUTUAL); err != nil {
				name := s.GetName()
				if name == "" {
					name = s.GetPort().GetName()
				}
				if name == "" {
					name = fmt.Sprintf("servers[%d]", i)
				}
				out = append(out, credentialProblem{Credential: t.GetCredentialName(), Gateway: c.Namespace + "/" + c.Name,
					Server: name, Error: err.Error() + "; the server is left out of the gateway's listeners"})
			}
		}
	}
	return out
}
