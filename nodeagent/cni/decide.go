package cni

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/baremesh/baremesh/nodeagent/iptables"
)

// Names istio-cni keys its decisions on.
const (
	ProxyContainer     = "istio-proxy"
	InitContainer      = "istio-init"
	AnnoSidecarStatus  = "sidecar.istio.io/status"
	AnnoInject         = "sidecar.istio.io/inject"
	AnnoInterception   = "sidecar.istio.io/interceptionMode"
	AnnoRedirection    = "ambient.istio.io/redirection"
	LabelDataplaneMode = "istio.io/dataplane-mode"

	AnnoIncludeInboundPorts    = "traffic.sidecar.istio.io/includeInboundPorts"
	AnnoExcludeInboundPorts    = "traffic.sidecar.istio.io/excludeInboundPorts"
	AnnoIncludeOutboundPorts   = "traffic.sidecar.istio.io/includeOutboundPorts"
	AnnoExcludeOutboundPorts   = "traffic.sidecar.istio.io/excludeOutboundPorts"
	AnnoIncludeOutboundIPRange = "traffic.sidecar.istio.io/includeOutboundIPRanges"
	AnnoExcludeOutboundIPRange = "traffic.sidecar.istio.io/excludeOutboundIPRanges"
	AnnoExcludeInterfaces      = "traffic.sidecar.istio.io/excludeInterfaces"

	EnvDNSCapture   = "ISTIO_META_DNS_CAPTURE"
	EnvInvalidDrop  = "INVALID_DROP"
	EnvDisableEnvoy = "DISABLE_ENVOY"
)

// Action is what the plugin does for a pod.
type Action string

// Actions.
const (
	ActionSkip    Action = "skip"
	ActionSidecar Action = "sidecar"
	ActionAmbient Action = "ambient"
)

// Decision is the outcome of Decide. Capture is set only for
// ActionSidecar; Reason says why in words a log reader understands.
type Decision struct {
	Action  Action
	Reason  string
	Capture iptables.Config
}

// Decide is the pure decision: no I/O. ns may be nil when the namespace
// was not read (ambient disabled). An error means the pod asks for
// capture with annotations that cannot be honoured; ADD must fail then,
// as istio-cni's does, rather than run the pod uncaptured.
func Decide(pod *corev1.Pod, ns *corev1.Namespace, cfg *PluginConfig) (Decision, error) {
	if slices.Contains(cfg.Kubernetes.ExcludeNamespaces, pod.Namespace) {
		return skip("namespace %s is excluded", pod.Namespace), nil
	}
	if pod.Spec.HostNetwork {
		return skip("pod uses the host network"), nil
	}
	anno := pod.Annotations
	_, hasStatus := anno[AnnoSidecarStatus]
	if cfg.AmbientEnabled && ns != nil && !hasStatus && ns.Labels[LabelDataplaneMode] == "ambient" {
		if anno[AnnoRedirection] == "disabled" {
			return skip("ambient redirection disabled by %s", AnnoRedirection), nil
		}
		if m, ok := pod.Labels[LabelDataplaneMode]; ok && m == "none" {
			return skip("pod label %s=none", LabelDataplaneMode), nil
		}
		return Decision{Action: ActionAmbient, Reason: fmt.Sprintf("namespace %s is ambient", ns.Name)}, nil
	}
	proxy := container(pod.Spec.Containers, ProxyContainer)
	switch {
	case proxy == nil:
		return skip("no %s container", ProxyContainer), nil
	case container(pod.Spec.InitContainers, InitContainer) != nil:
		return skip("%s init container sets up capture", InitContainer), nil
	case !hasStatus:
		return skip("no %s annotation", AnnoSidecarStatus), nil
	}
	if v, ok := anno[AnnoInject]; ok {
		if b, err := strconv.ParseBool(v); err == nil && !b {
			return skip("%s is %q", AnnoInject, v), nil
		}
	}
	if b, _ := strconv.ParseBool(env(proxy, EnvDisableEnvoy)); b {
		return skip("proxyless (%s)", EnvDisableEnvoy), nil
	}
	capture, err := sidecarCapture(pod, proxy)
	if err != nil {
		return Decision{}, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return Decision{Action: ActionSidecar, Reason: "sidecar injected", Capture: capture}, nil
}

func skip(format string, args ...any) Decision {
	return Decision{Action: ActionSkip, Reason: fmt.Sprintf(format, args...)}
}

func container(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

func env(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// sidecarCapture maps the annotations and the proxy container to a
// validated capture config.
func sidecarCapture(pod *corev1.Pod, proxy *corev1.Container) (iptables.Config, error) {
	anno := pod.Annotations
	c := iptables.Config{}
	switch m := anno[AnnoInterception]; m {
	case "", string(iptables.ModeRedirect):
		c.Mode = iptables.ModeRedirect
	case string(iptables.ModeTProxy):
		c.Mode = iptables.ModeTProxy
	default:
		return c, fmt.Errorf("annotation %s: unsupported interception mode %q (want REDIRECT or TPROXY)", AnnoInterception, m)
	}
	var err error
	if v, ok := anno[AnnoIncludeInboundPorts]; ok {
		c.InboundPorts = splitList(v)
		if c.InboundPorts == nil {
			c.InboundPorts = []string{}
		}
	}
	if c.InboundPortsExclude, err = ports(anno, AnnoExcludeInboundPorts); err != nil {
		return c, err
	}
	if c.OutboundPortsInclude, err = ports(anno, AnnoIncludeOutboundPorts); err != nil {
		return c, err
	}
	if c.OutboundPortsExclude, err = ports(anno, AnnoExcludeOutboundPorts); err != nil {
		return c, err
	}
	if v, ok := anno[AnnoIncludeOutboundIPRange]; ok {
		c.OutboundIPRanges = splitList(v)
		if c.OutboundIPRanges == nil {
			c.OutboundIPRanges = []string{}
		}
	}
	c.OutboundIPRangesExclude = splitList(anno[AnnoExcludeOutboundIPRange])
	c.ExcludeInterfaces = splitList(anno[AnnoExcludeInterfaces])
	c.ProxyUID, c.ProxyGID = proxyIDs(pod, proxy)
	c.CaptureDNS, _ = strconv.ParseBool(env(proxy, EnvDNSCapture))
	// A pod's resolvers are not known here (its resolv.conf is the
	// kubelet's): capture DNS to any server, as istio-cni does.
	c.CaptureAllDNS = c.CaptureDNS
	c.DropInvalid, _ = strconv.ParseBool(env(proxy, EnvInvalidDrop))
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("capture from annotations: %w", err)
	}
	return c, nil
}

// proxyIDs: the container's runAsUser/runAsGroup, else the pod's, else
// 1337; a missing group follows the user as istio-cni does.
func proxyIDs(pod *corev1.Pod, proxy *corev1.Container) (uid, gid string) {
	var u, g *int64
	if sc := pod.Spec.SecurityContext; sc != nil {
		u, g = sc.RunAsUser, sc.RunAsGroup
	}
	if sc := proxy.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			u = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			g = sc.RunAsGroup
		}
	}
	uid = iptables.DefaultProxyID
	if u != nil {
		uid = strconv.FormatInt(*u, 10)
	}
	gid = uid
	if g != nil {
		gid = strconv.FormatInt(*g, 10)
	}
	return uid, gid
}

// splitList splits a comma-separated annotation; nil when empty.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func ports(anno map[string]string, key string) ([]int, error) {
	var out []int
	for _, s := range splitList(anno[key]) {
		p, err := strconv.Atoi(s)
		if err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("annotation %s: %q is not a port number", key, s)
		}
		out = append(out, p)
	}
	return out, nil
}
