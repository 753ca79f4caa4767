package cni

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	corev1 "k8s.io/api/core/v1"

	"github.com/baremesh/baremesh/nodeagent/iptables"
	"github.com/baremesh/baremesh/nodeagent/tunnel"
)

// SupportedVersions are the CNI spec versions the plugin speaks; older
// ones have no prevResult to chain on.
var SupportedVersions = version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")

// PodSource reads what Decide needs from the Kubernetes API. Errors
// wrapping ErrPodNotFound are permanent; others may be retried.
type PodSource interface {
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	Namespace(ctx context.Context, name string) (*corev1.Namespace, error)
}

// ErrPodNotFound: the API server has no such pod (or namespace).
var ErrPodNotFound = errors.New("not found in the Kubernetes API")

// Capturer installs and removes capture rules inside a network namespace
// given by path. Apply is atomic: on error no rules of ours remain.
type Capturer interface {
	Apply(ctx context.Context, netnsPath string, backend iptables.Backend, rs *iptables.Ruleset) error
	Remove(ctx context.Context, netnsPath string, backend iptables.Backend, prefix string) error
}

// Plugin is the CNI plugin shell around Decide. One Plugin serves one
// process invocation (the runtime execs the plugin per command).
type Plugin struct {
	// Stderr receives logs (the runtime forwards or records it).
	Stderr io.Writer
	// Stdout receives the result (skel prints errors itself).
	Stdout io.Writer
	// NewSource makes the pod source from the configuration.
	NewSource func(cfg *PluginConfig) (PodSource, error)
	Capture   Capturer
	// NewEnroller makes the enrolment of ambient pods in the node
	// tunnel (in the runtime's namespace, the node's).
	NewEnroller func(ctx context.Context, cfg *PluginConfig) (Enroller, error)
}

// Enroller adds ambient pods' addresses to the node tunnel's redirection
// and removes them (nodeagent/tunnel's Enroller). Both are idempotent and
// safe under concurrent plugin invocations.
type Enroller interface {
	// EnrollOwned enrols ip tagged with its pod sandbox (tunnel.Owner).
	EnrollOwned(ctx context.Context, ip netip.Addr, owner string) error
	Unenroll(ctx context.Context, ip netip.Addr) error
	// UnenrollContainer removes the enrolments tagged with containerID.
	UnenrollContainer(ctx context.Context, containerID string) error
}

// Main runs the plugin as the process's main function.
func Main(about string) {
	p := &Plugin{Stderr: os.Stderr, Stdout: os.Stdout, NewSource: NewKubeSource, Capture: NetnsCapturer{}, NewEnroller: NewTunnelEnroller}
	skel.PluginMainFuncs(skel.CNIFuncs{Add: p.CmdAdd, Del: p.CmdDel, Check: p.CmdCheck}, SupportedVersions, about)
}

func (p *Plugin) logger(cfg *PluginConfig, args *skel.CmdArgs) *slog.Logger {
	level := slog.LevelWarn
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	return slog.New(slog.NewTextHandler(p.Stderr, &slog.HandlerOptions{Level: level})).
		With("component", "cni", "container", shortID(args.ContainerID))
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// CmdAdd implements ADD: decide, apply in the pod's netns, and print the
// previous result unchanged.
func (p *Plugin) CmdAdd(args *skel.CmdArgs) error {
	cfg, err := ParseConfig(args.StdinData)
	if err != nil {
		return err
	}
	if cfg.PrevResult == nil {
		return types.NewError(types.ErrInvalidNetworkConfig, "baremesh-cni: no prevResult",
			"baremesh-cni must be chained after the node's main plugin in a conflist")
	}
	log := p.logger(cfg, args)
	pa, err := ParseArgs(args.Args)
	if err != nil {
		return err
	}
	name, namespace := string(pa.K8S_POD_NAME), string(pa.K8S_POD_NAMESPACE)
	if name == "" || namespace == "" {
		log.Info("not a Kubernetes pod (no K8S_POD_NAME/K8S_POD_NAMESPACE), passing through")
		return p.print(cfg)
	}
	log = log.With("pod", namespace+"/"+name)
	d, err := p.decide(cfg, namespace, name)
	if err != nil {
		return err
	}
	log.Info("decision", "action", d.Action, "reason", d.Reason)
	switch d.Action {
	case ActionSidecar:
		// A pod without an IPv6 address needs no ip6tables rules: half the
		// iptables-restore work of an ADD.
		d.Capture.DisableIPv6 = !hasIPv6(cfg.PrevResult)
		rs, err := iptables.Render(d.Capture)
		if err != nil {
			return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("baremesh-cni: pod %s/%s: rendering capture rules", namespace, name), err.Error())
		}
		ctx, cancel := context.WithTimeout(context.Background(), applyTimeout)
		defer cancel()
		if err := p.Capture.Apply(ctx, args.Netns, cfg.IptablesBackend, rs); err != nil {
			return types.NewError(types.ErrInternal, fmt.Sprintf("baremesh-cni: pod %s/%s: applying capture rules in %s", namespace, name, args.Netns), err.Error())
		}
	case ActionAmbient:
		// The node tunnel redirects ambient pods on the host side; the
		// pod's own namespace gets no rules, as in istio-cni's ambient mode.
		if err := p.enrol(cfg, log, namespace+"/"+name, args); err != nil {
			return err
		}
	}
	return p.print(cfg)
}

// enrol adds the pod's addresses from prevResult to the tunnel's
// enrolment; on a failure it removes those it added.
func (p *Plugin) enrol(cfg *PluginConfig, log *slog.Logger, pod string, args *skel.CmdArgs) error {
	ips := podIPs(cfg.PrevResult)
	if len(ips) == 0 {
		return types.NewError(types.ErrInvalidNetworkConfig, "baremesh-cni: ambient pod "+pod+": prevResult has no address to enrol", "")
	}
	owner, err := tunnel.Owner(args.ContainerID, args.Netns)
	if err != nil {
		return types.NewError(types.ErrInvalidNetworkConfig, "baremesh-cni: ambient pod "+pod, err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), applyTimeout)
	defer cancel()
	en, err := p.NewEnroller(ctx, cfg)
	if err != nil {
		return types.NewError(types.ErrInternal, "baremesh-cni: ambient pod "+pod+": enrolment", err.Error())
	}
	for i, ip := range ips {
		if err := en.EnrollOwned(ctx, ip, owner); err != nil {
			for _, done := range ips[:i] {
				_ = en.Unenroll(ctx, done)
			}
			return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("baremesh-cni: ambient pod %s: enrolling %v in the node tunnel", pod, ip), err.Error())
		}
	}
	log.Info("ambient pod enrolled in the node tunnel", "ips", ips)
	return nil
}

// podIPs lists the addresses (IPv4 and IPv6) the main plugin gave the
// pod. IPv6 ones are redirected when the tunnel has ipv6: true.
func podIPs(prev types.Result) []netip.Addr {
	if prev == nil {
		return nil
	}
	r, err := current.NewResultFromResult(prev)
	if err != nil {
		return nil
	}
	var ips []netip.Addr
	for _, ip := range r.IPs {
		if v4 := ip.Address.IP.To4(); v4 != nil {
			ips = append(ips, netip.AddrFrom4([4]byte(v4)))
		} else if a, ok := netip.AddrFromSlice(ip.Address.IP); ok {
			ips = append(ips, a)
		}
	}
	return ips
}

// decide reads the pod (and the namespace when ambient is on) and calls
// Decide, mapping each failure to a CNI error.
func (p *Plugin) decide(cfg *PluginConfig, namespace, name string) (Decision, error) {
	if excluded(cfg, namespace) {
		return skip("namespace %s is excluded", namespace), nil
	}
	src, err := p.NewSource(cfg)
	if err != nil {
		return Decision{}, types.NewError(types.ErrInvalidNetworkConfig, "baremesh-cni: Kubernetes client from "+cfg.Kubernetes.Kubeconfig, err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.LookupTimeout())
	defer cancel()
	pod, err := src.Pod(ctx, namespace, name)
	if err != nil {
		return Decision{}, lookupError(fmt.Sprintf("pod %s/%s", namespace, name), err)
	}
	var ns *corev1.Namespace
	if cfg.AmbientEnabled {
		if ns, err = src.Namespace(ctx, namespace); err != nil {
			return Decision{}, lookupError("namespace "+namespace, err)
		}
	}
	d, err := Decide(pod, ns, cfg)
	if err != nil {
		return Decision{}, types.NewError(types.ErrInvalidNetworkConfig, "baremesh-cni: cannot honour the pod's capture annotations", err.Error())
	}
	return d, nil
}

func lookupError(what string, err error) error {
	if errors.Is(err, ErrPodNotFound) {
		return types.NewError(types.ErrInternal, fmt.Sprintf("baremesh-cni: %s not found in the Kubernetes API", what), err.Error())
	}
	return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("baremesh-cni: reading %s from the Kubernetes API failed", what), err.Error())
}

func excluded(cfg *PluginConfig, namespace string) bool {
	for _, n := range cfg.Kubernetes.ExcludeNamespaces {
		if strings.EqualFold(n, namespace) {
			return true
		}
	}
	return false
}

func (p *Plugin) print(cfg *PluginConfig) error {
	res, err := cfg.PrevResult.GetAsVersion(cfg.CNIVersion)
	if err != nil {
		return types.NewError(types.ErrIncompatibleCNIVersion, "baremesh-cni: converting prevResult to "+cfg.CNIVersion, err.Error())
	}
	if err := res.PrintTo(p.Stdout); err != nil {
		return types.NewError(types.ErrIOFailure, "baremesh-cni: writing result", err.Error())
	}
	return nil
}

// CmdDel implements DEL: it removes our rules if the namespace still
// exists. It never reads the API (the pod may be gone) and never fails
// because something is already gone.
func (p *Plugin) CmdDel(args *skel.CmdArgs) error {
	cfg, err := ParseConfig(args.StdinData)
	if err != nil {
		return err
	}
	// Unenrol whatever the pod's namespace: the rules are on the node.
	// Without a prevResult (runtimes before CNI 0.4.0) the addresses are
	// unknown: the rules tagged with the container ID go.
	if cfg.AmbientEnabled {
		ctx, cancel := context.WithTimeout(context.Background(), applyTimeout)
		defer cancel()
		en, err := p.NewEnroller(ctx, cfg)
		for _, ip := range podIPs(cfg.PrevResult) {
			if err == nil {
				err = en.Unenroll(ctx, ip)
			}
		}
		if err == nil {
			err = en.UnenrollContainer(ctx, args.ContainerID)
		}
		if err != nil {
			return types.NewError(types.ErrTryAgainLater, "baremesh-cni: unenrolling the pod from the node tunnel", err.Error())
		}
	}
	if args.Netns == "" {
		return nil
	}
	if _, err := os.Stat(args.Netns); err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), applyTimeout)
	defer cancel()
	if err := p.Capture.Remove(ctx, args.Netns, cfg.IptablesBackend, iptables.DefaultChainPrefix); err != nil {
		// The namespace is about to go; its rules go with it.
		p.logger(cfg, args).Warn("removing capture rules", "netns", args.Netns, "err", err)
	}
	return nil
}

// CmdCheck implements CHECK: the configuration must be valid and chained.
func (p *Plugin) CmdCheck(args *skel.CmdArgs) error {
	cfg, err := ParseConfig(args.StdinData)
	if err != nil {
		return err
	}
	if cfg.PrevResult == nil {
		return types.NewError(types.ErrInvalidNetworkConfig, "baremesh-cni: no prevResult", "CHECK needs the result of the main plugin")
	}
	return nil
}

// hasIPv6 reports whether the main plugin gave the pod an IPv6 address.
func hasIPv6(prev types.Result) bool {
	r, err := current.NewResultFromResult(prev)
	if err != nil {
		return true // unknown: render both families
	}
	for _, ip := range r.IPs {
		if ip.Address.IP.To4() == nil {
			return true
		}
	}
	return false
}
