package cni

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baremesh/baremesh/nodeagent/iptables"
)

func i64(v int64) *int64 { return &v }

// injected returns a pod as the sidecar injector leaves it (istio-cni
// mode: no istio-init), edited by mut.
func injected(mut func(p *corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop",
			Annotations: map[string]string{AnnoSidecarStatus: `{"containers":["istio-proxy"]}`}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}, {Name: ProxyContainer}}},
	}
	if mut != nil {
		mut(p)
	}
	return p
}

func proxyEnv(p *corev1.Pod, name, value string) {
	p.Spec.Containers[1].Env = append(p.Spec.Containers[1].Env, corev1.EnvVar{Name: name, Value: value})
}

func TestDecide(t *testing.T) {
	def := iptables.Config{}.WithDefaults()
	with := func(f func(c *iptables.Config)) iptables.Config { c := def; f(&c); return c }
	ambientNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{LabelDataplaneMode: "ambient"}}}
	cfg := &PluginConfig{Kubernetes: Kubernetes{ExcludeNamespaces: []string{"kube-system", "baremesh-system"}}}
	ambientCfg := &PluginConfig{AmbientEnabled: true}
	tests := []struct {
		name    string
		pod     *corev1.Pod
		ns      *corev1.Namespace
		cfg     *PluginConfig
		action  Action
		capture iptables.Config
		reason  string // substring of Reason or of the error
		wantErr bool
	}{
		{name: "defaults", pod: injected(nil), action: ActionSidecar, capture: def},
		{name: "excluded namespace", pod: injected(func(p *corev1.Pod) { p.Namespace = "baremesh-system" }), action: ActionSkip, reason: "excluded"},
		{name: "host network", pod: injected(func(p *corev1.Pod) { p.Spec.HostNetwork = true }), action: ActionSkip, reason: "host network"},
		{name: "no proxy container", pod: injected(func(p *corev1.Pod) { p.Spec.Containers = p.Spec.Containers[:1] }), action: ActionSkip, reason: "no istio-proxy"},
		{name: "istio-init does it", pod: injected(func(p *corev1.Pod) { p.Spec.InitContainers = []corev1.Container{{Name: InitContainer}} }), action: ActionSkip, reason: "istio-init"},
		{name: "no status", pod: injected(func(p *corev1.Pod) { delete(p.Annotations, AnnoSidecarStatus) }), action: ActionSkip, reason: "no sidecar.istio.io/status"},
		{name: "inject false", pod: injected(func(p *corev1.Pod) { p.Annotations[AnnoInject] = "false" }), action: ActionSkip, reason: "inject"},
		{name: "inject true", pod: injected(func(p *corev1.Pod) { p.Annotations[AnnoInject] = "true" }), action: ActionSidecar, capture: def},
		{name: "proxyless", pod: injected(func(p *corev1.Pod) { proxyEnv(p, EnvDisableEnvoy, "true") }), action: ActionSkip, reason: "proxyless"},
		{name: "DISABLE_ENVOY false", pod: injected(func(p *corev1.Pod) { proxyEnv(p, EnvDisableEnvoy, "false") }), action: ActionSidecar, capture: def},
		{name: "all annotations", pod: injected(func(p *corev1.Pod) {
			a := p.Annotations
			a[AnnoIncludeInboundPorts] = "8080, 9090"
			a[AnnoExcludeInboundPorts] = "8443"
			a[AnnoIncludeOutboundPorts] = "5432"
			a[AnnoExcludeOutboundPorts] = "25,465"
			a[AnnoIncludeOutboundIPRange] = "10.0.0.0/8"
			a[AnnoExcludeOutboundIPRange] = "10.96.0.1/32"
			a[AnnoExcludeInterfaces] = "eth1"
		}), action: ActionSidecar, capture: with(func(c *iptables.Config) {
			c.InboundPorts = []string{"8080", "9090"}
			c.InboundPortsExclude = []int{8443}
			c.OutboundPortsInclude = []int{5432}
			c.OutboundPortsExclude = []int{25, 465}
			c.OutboundIPRanges = []string{"10.0.0.0/8"}
			c.OutboundIPRangesExclude = []string{"10.96.0.1/32"}
			c.ExcludeInterfaces = []string{"eth1"}
		})},
		{name: "empty include inbound captures none", pod: injected(func(p *corev1.Pod) { p.Annotations[AnnoIncludeInboundPorts] = "" }),
			action: ActionSidecar, capture: with(func(c *iptables.Config) { c.InboundPorts = []string{} })},
		{name: "uid and gid from container", pod: injected(func(p *corev1.Pod) {
			p.Spec.Containers[1].SecurityContext = &corev1.SecurityContext{RunAsUser: i64(2000), RunAsGroup: i64(3000)}
		}), action: ActionSidecar, capture: with(func(c *iptables.Config) { c.ProxyUID, c.ProxyGID = "2000", "3000" })},
		{name: "gid follows uid", pod: injected(func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: i64(1)}
			p.Spec.Containers[1].SecurityContext = &corev1.SecurityContext{RunAsUser: i64(2001)}
		}), action: ActionSidecar, capture: with(func(c *iptables.Config) { c.ProxyUID, c.ProxyGID = "2001", "2001" })},
		{name: "dns capture and invalid drop", pod: injected(func(p *corev1.Pod) {
			proxyEnv(p, EnvDNSCapture, "true")
			proxyEnv(p, EnvInvalidDrop, "true")
		}), action: ActionSidecar, capture: with(func(c *iptables.Config) { c.CaptureDNS, c.CaptureAllDNS, c.DropInvalid = true, true, true })},
		{name: "tproxy", pod: injected(func(p *corev1.Pod) { p.Annotations[AnnoInterception] = "TPROXY" }),
			action: ActionSidecar, capture: with(func(c *iptables.Config) { c.Mode = iptables.ModeTProxy })},
		{name: "bad interception mode", pod: injected(func(p *corev1.Pod) { p.Annotations[AnnoInterception] = "EBPF" }), wantErr: true, reason: "interceptionMode"},
		{name: "bad port", pod: injected(func(p *corev1.Pod) { p.Annotations[AnnoExcludeOutboundPorts] = "http" }), wantErr: true, reason: "excludeOutboundPorts"},
		{name: "bad cidr", pod: injected(func(p *corev1.Pod) { p.Annotations[AnnoExcludeOutboundIPRange] = "10.0.0.0/33" }), wantErr: true, reason: "outboundIPRangesExclude"},
		{name: "ambient", pod: injected(func(p *corev1.Pod) { delete(p.Annotations, AnnoSidecarStatus) }), ns: ambientNS, cfg: ambientCfg, action: ActionAmbient},
		{name: "ambient but sidecar wins", pod: injected(nil), ns: ambientNS, cfg: ambientCfg, action: ActionSidecar, capture: def},
		{name: "ambient redirection disabled", pod: injected(func(p *corev1.Pod) {
			delete(p.Annotations, AnnoSidecarStatus)
			p.Annotations[AnnoRedirection] = "disabled"
		}), ns: ambientNS, cfg: ambientCfg, action: ActionSkip, reason: "disabled"},
		{name: "ambient not enabled in plugin", pod: injected(func(p *corev1.Pod) { delete(p.Annotations, AnnoSidecarStatus) }), ns: ambientNS, action: ActionSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.cfg
			if c == nil {
				c = cfg
			}
			got, err := Decide(tt.pod, tt.ns, c)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), tt.reason) {
					t.Fatalf("err = %v, want one mentioning %q", err, tt.reason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Action != tt.action || !strings.Contains(got.Reason, tt.reason) {
				t.Fatalf("got %s (%s), want %s (%q)", got.Action, got.Reason, tt.action, tt.reason)
			}
			if tt.action == ActionSidecar && !reflect.DeepEqual(got.Capture, tt.capture) {
				t.Errorf("capture\n got %+v\nwant %+v", got.Capture, tt.capture)
			}
		})
	}
}
