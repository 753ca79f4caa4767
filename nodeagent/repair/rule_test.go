package repair

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baremesh/baremesh/nodeagent/cni"
)

var ready = time.Date(2026, 3, 1, 12, 0, 0, 500e6, time.UTC)

// sidecarPod is a pod baremesh-cni captures, created at created.
func sidecarPod(created time.Time, mut ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "app", CreationTimestamp: metav1.NewTime(created),
			Annotations: map[string]string{cni.AnnoSidecarStatus: "{}"}},
		Spec: corev1.PodSpec{NodeName: "n1",
			InitContainers: []corev1.Container{{Name: ValidationContainer}},
			Containers:     []corev1.Container{{Name: "app"}, {Name: cni.ProxyContainer}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, m := range mut {
		m(p)
	}
	return p
}

func validation(current, last *int32) func(*corev1.Pod) {
	term := func(c *int32) *corev1.ContainerStateTerminated {
		if c == nil {
			return nil
		}
		return &corev1.ContainerStateTerminated{ExitCode: *c}
	}
	return func(p *corev1.Pod) {
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: ValidationContainer,
			State: corev1.ContainerState{Terminated: term(current)}, LastTerminationState: corev1.ContainerState{Terminated: term(last)}}}
	}
}

func ptr(v int32) *int32 { return &v }

func TestNeedsRepair(t *testing.T) {
	cfg := &cni.PluginConfig{AmbientEnabled: true}
	cfg.Kubernetes.ExcludeNamespaces = []string{"kube-system"}
	after, before := ready.Add(time.Minute), ready.Add(-time.Minute)
	ambientNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: map[string]string{cni.LabelDataplaneMode: "ambient"}}}
	now := metav1.NewTime(after)
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		ns     *corev1.Namespace
		ready  time.Time
		want   bool
		reason string
	}{
		{"fine: created after ready", sidecarPod(after), nil, ready, false, "set up by baremesh-cni"},
		{"created before ready", sidecarPod(before), nil, ready, true, string(ReasonCreatedBeforeReady)},
		{"same second as ready presumed fine", sidecarPod(ready.Truncate(time.Second)), nil, ready, false, "set up"},
		{"ready time unknown", sidecarPod(before), nil, time.Time{}, false, "set up"},
		{"validation failed", sidecarPod(after, validation(ptr(126), nil)), nil, ready, true, string(ReasonValidationFailed)},
		{"validation failed last run", sidecarPod(after, validation(nil, ptr(1))), nil, ready, true, string(ReasonValidationFailed)},
		{"validation passed beats ready time", sidecarPod(before, validation(ptr(0), nil)), nil, ready, false, "validated"},
		{"excluded namespace", sidecarPod(before, validation(ptr(126), nil), func(p *corev1.Pod) { p.Namespace = "kube-system" }), nil, ready, false, "excluded"},
		{"not injected", sidecarPod(before, func(p *corev1.Pod) { p.Annotations = nil }), nil, ready, false, "not captured"},
		{"istio-init does it", sidecarPod(before, func(p *corev1.Pod) {
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: cni.InitContainer})
		}), nil, ready, false, "not captured"},
		{"host network", sidecarPod(before, func(p *corev1.Pod) { p.Spec.HostNetwork = true }), nil, ready, false, "host network"},
		{"being deleted", sidecarPod(before, func(p *corev1.Pod) { p.DeletionTimestamp = &now }), nil, ready, false, "being deleted"},
		{"finished", sidecarPod(before, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), nil, ready, false, "Succeeded"},
		{"bad annotations", sidecarPod(before, func(p *corev1.Pod) { p.Annotations[cni.AnnoExcludeInboundPorts] = "x" }), nil, ready, false, "not repairable"},
		{"ambient pod before ready", sidecarPod(before, func(p *corev1.Pod) {
			p.Annotations = nil
			p.Spec.Containers = p.Spec.Containers[:1]
		}), ambientNS, ready, true, string(ReasonCreatedBeforeReady)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, reason := NeedsRepair(tc.pod, tc.ns, cfg, tc.ready)
			if got != tc.want || !strings.Contains(reason, tc.reason) {
				t.Errorf("NeedsRepair = %v, %q; want %v, reason containing %q", got, reason, tc.want, tc.reason)
			}
		})
	}
}
