package push

// Reason is why a push happened (istiod's TriggerReason). The reasons are
// declared here, with what each implies for who is affected; /debug/pushz
// shows them by name.
type Reason string

// The reasons baremesh pushes for.
const (
	// ReasonConfig: configs changed (Request.Configs, Request.Services).
	ReasonConfig Reason = "config"
	// ReasonEndpoint: only endpoints changed (Request.Endpoints).
	ReasonEndpoint Reason = "endpoint"
	// ReasonKubeService and ReasonKubeEndpoint: a Kubernetes cluster's
	// Services or endpoints changed (Pipeline.OnKube).
	ReasonKubeService  Reason = "kube-service"
	ReasonKubeEndpoint Reason = "kube-endpoint"
	// ReasonMesh: the mesh config changed. Global.
	ReasonMesh Reason = "mesh"
	// ReasonInitial: the first snapshot. Global.
	ReasonInitial Reason = "initial"
	// ReasonCredentials: gateway credentials changed (gateways only).
	ReasonCredentials Reason = "credentials"
	// ReasonTrust: the CA's roots changed.
	ReasonTrust Reason = "trust"
	// ReasonJWKS: fetched JWT key sets changed.
	ReasonJWKS Reason = "jwks"
	// ReasonNetworks: the meshNetworks gateways changed. Global.
	ReasonNetworks Reason = "networks"
)

// Global reports whether a push for the reason may change anything for
// any proxy, whatever configs or services the request lists: every proxy
// and every type is affected.
func (r Reason) Global() bool { return r == ReasonMesh || r == ReasonInitial || r == ReasonNetworks }

// Reasons count the reasons merged into one request.
type Reasons map[Reason]int

// NewReasons counts each of rs once.
func NewReasons(rs ...Reason) Reasons {
	out := make(Reasons, len(rs))
	for _, r := range rs {
		out[r]++
	}
	return out
}

// Has reports whether r was a reason of the push.
func (rs Reasons) Has(r Reason) bool { return rs[r] > 0 }

// Global reports whether any of the reasons is global (Reason.Global).
func (rs Reasons) Global() bool {
	for r, n := range rs {
		if n > 0 && r.Global() {
			return true
		}
	}
	return false
}
