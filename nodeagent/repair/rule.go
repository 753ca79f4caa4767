// Package repair is the node agent's repair controller: it watches the
// pods scheduled on its node and finds those whose traffic capture was not
// set up by baremesh-cni, then labels them or deletes them so that their
// owner recreates them (through the plugin this time).
//
// The rule (NeedsRepair) is pure; the controller (Controller) is the
// client-go shell around it. The package imports only nodeagent/cni of
// this module, never core/, sources/, xdsserver/ or cmd/.
package repair

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/baremesh/baremesh/nodeagent/cni"
)

// LabelBroken is the label the controller puts on a broken pod in label
// mode; its value is the Reason.
const LabelBroken = "baremesh.io/capture-broken"

// ValidationContainer is the init container istio's injector adds when
// the CNI plugin does the capture: it checks that redirection works and
// exits non-zero (126) when it does not.
const ValidationContainer = "istio-validation"

// Reason says why a pod needs repair. Values are valid label values.
type Reason string

// Reasons.
const (
	// ReasonValidationFailed: the istio-validation init container
	// terminated with a non-zero exit code (now or in its last run).
	ReasonValidationFailed Reason = "validation-failed"
	// ReasonCreatedBeforeReady: the pod was created before the plugin was
	// chained into the node's CNI config, so no ADD of ours ran for it.
	ReasonCreatedBeforeReady Reason = "created-before-cni-ready"
)

// NeedsRepair decides whether a pod's capture was not set up. It is pure:
// no I/O, no clock. ns may be nil (ambient decisions then skip).
// readySince is when baremesh-cni became ready on the node; zero turns the
// "created before ready" rule off.
//
// The rule, in order:
//  1. pods being deleted, finished (Succeeded/Failed) or on the host
//     network, and pods Decide does not capture (excluded namespaces
//     included), never need repair;
//  2. a capture decision that errs (bad annotations) is not repairable by
//     recreating the pod: no repair, the reason says why;
//  3. an istio-validation init container that terminated non-zero, in its
//     current or last state: validation-failed;
//  4. one that terminated with 0: capture was verified, no repair;
//  5. a pod created before readySince: created-before-cni-ready. The API
//     server stores creation times in whole seconds, so readySince is
//     truncated to the second: a pod created in the same second as the
//     plugin became ready is presumed fine (fail towards doing nothing).
//
// We cannot see a pod's netns from the API, so "no BAREMESH chains in the
// pod" is not checked here; the validation container is how istio's own
// repair controller learns of failed setups, and the ready time covers
// pods that started before the plugin existed.
func NeedsRepair(pod *corev1.Pod, ns *corev1.Namespace, cfg *cni.PluginConfig, readySince time.Time) (bool, string) {
	switch {
	case pod.DeletionTimestamp != nil:
		return false, "pod is being deleted"
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return false, fmt.Sprintf("pod phase is %s", pod.Status.Phase)
	}
	d, err := cni.Decide(pod, ns, cfg)
	if err != nil {
		return false, fmt.Sprintf("not repairable by recreating: %v", err)
	}
	if d.Action == cni.ActionSkip {
		return false, "not captured: " + d.Reason
	}
	if code, ok := validationExit(pod); ok {
		if code != 0 {
			return true, string(ReasonValidationFailed)
		}
		return false, "capture validated"
	}
	if !readySince.IsZero() && pod.CreationTimestamp.Time.Before(readySince.Truncate(time.Second)) {
		return true, string(ReasonCreatedBeforeReady)
	}
	return false, "capture set up by baremesh-cni"
}

// validationExit returns the exit code of the istio-validation container's
// termination, preferring a non-zero one from the current or last state.
func validationExit(pod *corev1.Pod) (int32, bool) {
	for _, s := range pod.Status.InitContainerStatuses {
		if s.Name != ValidationContainer {
			continue
		}
		for _, t := range []*corev1.ContainerStateTerminated{s.State.Terminated, s.LastTerminationState.Terminated} {
			if t != nil && t.ExitCode != 0 {
				return t.ExitCode, true
			}
		}
		if s.State.Terminated != nil {
			return 0, true
		}
	}
	return 0, false
}
