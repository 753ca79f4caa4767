package cni

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/baremesh/baremesh/nodeagent/iptables"
)

// PluginName is the plugin's binary name and its "type" in a conflist.
const PluginName = "baremesh-cni"

// Defaults of the plugin configuration.
const (
	DefaultPodLookupTimeout = 5 * time.Second
	DefaultKubeconfig       = "/etc/cni/net.d/baremesh-cni.kubeconfig"
)

// Kubernetes is the "kubernetes" object of the plugin configuration.
type Kubernetes struct {
	// Kubeconfig is the file the plugin reads to reach the API server.
	Kubeconfig string `json:"kubeconfig"`
	// ExcludeNamespaces are never captured (the control plane's own
	// namespace and kube-system belong here).
	ExcludeNamespaces []string `json:"excludeNamespaces"`
}

// PluginConfig is the plugin's network configuration (its entry in the
// conflist, with the runtime's fields).
type PluginConfig struct {
	types.NetConf
	Kubernetes Kubernetes `json:"kubernetes"`
	// AmbientEnabled turns on the ambient decision (namespace label
	// istio.io/dataplane-mode: ambient).
	AmbientEnabled bool `json:"ambientEnabled"`
	// AmbientMark is the node tunnel's mark (its config's "mark"); the
	// enrolment rules of ambient pods set it. Default 0x100 (256).
	// `baremesh-agent cni install -tunnel-config FILE` writes it from the
	// tunnel's own configuration.
	AmbientMark uint32 `json:"ambientMark"`
	// EnrolLock is the lock file serialising enrolments; default
	// /run/baremesh/enrol.lock.
	EnrolLock string `json:"enrolLock"`
	// IptablesBackend is "nft", "legacy" or empty for auto-detection.
	IptablesBackend iptables.Backend `json:"iptablesBackend"`
	// PodLookupTimeout bounds the pod lookup, e.g. "5s". Default 5s.
	PodLookupTimeout string `json:"podLookupTimeout"`
	// LogLevel is debug, info, warn or error (to stderr). Default warn.
	LogLevel string `json:"logLevel"`

	lookupTimeout time.Duration
}

// ParseConfig decodes and validates stdin; it fills PrevResult's parsed
// form into NetConf.PrevResult.
func ParseConfig(stdin []byte) (*PluginConfig, error) {
	var c PluginConfig
	if err := json.Unmarshal(stdin, &c); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "baremesh-cni: decoding network configuration from stdin", err.Error())
	}
	if c.RawPrevResult != nil {
		if err := version.ParsePrevResult(&c.NetConf); err != nil {
			return nil, types.NewError(types.ErrDecodingFailure, "baremesh-cni: decoding prevResult", err.Error())
		}
	}
	c.lookupTimeout = DefaultPodLookupTimeout
	if c.PodLookupTimeout != "" {
		d, err := time.ParseDuration(c.PodLookupTimeout)
		if err != nil || d <= 0 {
			return nil, types.NewError(types.ErrInvalidNetworkConfig, "baremesh-cni: podLookupTimeout", fmt.Sprintf("%q is not a positive duration", c.PodLookupTimeout))
		}
		c.lookupTimeout = d
	}
	if c.Kubernetes.Kubeconfig == "" {
		c.Kubernetes.Kubeconfig = DefaultKubeconfig
	}
	switch c.IptablesBackend {
	case "", iptables.BackendNFT, iptables.BackendLegacy:
	default:
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "baremesh-cni: iptablesBackend", fmt.Sprintf("unknown backend %q (want nft, legacy or empty)", c.IptablesBackend))
	}
	return &c, nil
}

// LookupTimeout is the validated pod lookup timeout.
func (c *PluginConfig) LookupTimeout() time.Duration { return c.lookupTimeout }

// PodArgs are the Kubernetes fields of CNI_ARGS.
type PodArgs struct {
	types.CommonArgs
	K8S_POD_NAME               types.UnmarshallableString //nolint:revive // CNI_ARGS names
	K8S_POD_NAMESPACE          types.UnmarshallableString //nolint:revive
	K8S_POD_INFRA_CONTAINER_ID types.UnmarshallableString //nolint:revive
	K8S_POD_UID                types.UnmarshallableString //nolint:revive
}

// ParseArgs reads CNI_ARGS.
func ParseArgs(args string) (PodArgs, error) {
	var a PodArgs
	a.IgnoreUnknown = true
	if err := types.LoadArgs(args, &a); err != nil {
		return a, types.NewError(types.ErrInvalidEnvironmentVariables, "baremesh-cni: parsing CNI_ARGS", err.Error())
	}
	return a, nil
}

// applyTimeout bounds the iptables work in the pod's namespace.
const applyTimeout = 20 * time.Second
