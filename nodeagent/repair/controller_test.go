package repair

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/nodeagent/cni"
	"github.com/baremesh/baremesh/nodeagent/kubetest"
)

func TestMain(m *testing.M) {
	testkit.Main(func() int {
		code := m.Run()
		kubetest.Stop()
		return code
	})
}

func clientset(t *testing.T) kubernetes.Interface { return kubetest.Clientset(t) }

// scenario creates, on node, a broken pod (istio-validation exited 126),
// a fine pod (validation passed), a broken pod in the excluded namespace
// and a broken pod on another node, in namespaces unique to the test.
type scenario struct {
	app, excluded                   string
	broken, fine, excludedPod, away string
}

func setup(t *testing.T, cs kubernetes.Interface, node string) scenario {
	t.Helper()
	ctx := context.Background()
	s := scenario{app: node + "-app", excluded: node + "-system",
		broken: "broken", fine: "fine", excludedPod: "broken-excluded", away: "broken-elsewhere"}
	for _, ns := range []string{s.app, s.excluded} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk := func(ns, name, onNode string, exit int32) {
		p := sidecarPod(time.Now())
		p.Namespace, p.Name, p.Spec.NodeName, p.CreationTimestamp = ns, name, onNode, metav1.Time{}
		p.Spec.InitContainers[0].Image, p.Spec.Containers[0].Image, p.Spec.Containers[1].Image = "v", "app", "proxy"
		created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating pod %s/%s: %v", ns, name, err)
		}
		// A bare API server runs no kubelet: the test reports the
		// validation container's outcome itself.
		created.Status.Phase = corev1.PodRunning
		created.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: ValidationContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit}}}}
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("pod %s/%s status: %v", ns, name, err)
		}
	}
	mk(s.app, s.broken, node, 126)
	mk(s.app, s.fine, node, 0)
	mk(s.excluded, s.excludedPod, node, 126)
	mk(s.app, s.away, node+"-other", 126)
	return s
}

func start(t *testing.T, cs kubernetes.Interface, node string, s scenario, mode Mode) *Controller {
	t.Helper()
	cfg := &cni.PluginConfig{}
	cfg.Kubernetes.ExcludeNamespaces = []string{s.excluded}
	c, err := New(slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "repair"), cs,
		Options{Node: node, Mode: mode, Plugin: cfg, DeleteRate: 50, DeleteBurst: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return c
}

func get(t *testing.T, cs kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		t.Fatal(err)
	}
	return p
}

// untouched checks the pods the controller must leave alone.
func untouched(t *testing.T, cs kubernetes.Interface, s scenario) {
	t.Helper()
	for _, p := range []struct{ ns, name string }{{s.app, s.fine}, {s.excluded, s.excludedPod}, {s.app, s.away}} {
		got := get(t, cs, p.ns, p.name)
		if got == nil || got.DeletionTimestamp != nil || got.Labels[LabelBroken] != "" {
			t.Errorf("pod %s/%s was touched: %+v", p.ns, p.name, got)
		}
	}
}

// uniqueNode names a node (and its namespaces) afresh for each run, since
// the API server outlives a test under -count.
func uniqueNode(base string) string {
	nodeSeq++
	return fmt.Sprintf("%s-%d", base, nodeSeq)
}

var nodeSeq int

func TestLabelMode(t *testing.T) {
	cs := clientset(t)
	node := uniqueNode("node-label")
	s := setup(t, cs, node)
	c := start(t, cs, node, s, ModeLabel)
	testkit.EventuallyWithin(t, repairWait, "broken pod labelled", func() bool {
		return get(t, cs, s.app, s.broken).Labels[LabelBroken] == string(ReasonValidationFailed)
	})
	// Three pods are on the node: once all are handled, a repair it
	// still owed would show up in Repaired.
	testkit.EventuallyWithin(t, repairWait, "all pods handled", func() bool { return c.Checked() >= 3 })
	if n := c.Repaired(); n != 1 {
		t.Errorf("repaired %d pods, want 1", n)
	}
	untouched(t, cs, s)
}

func TestDeleteMode(t *testing.T) {
	cs := clientset(t)
	node := uniqueNode("node-delete")
	s := setup(t, cs, node)
	c := start(t, cs, node, s, ModeDelete)
	testkit.EventuallyWithin(t, repairWait, "broken pod deleted", func() bool {
		p := get(t, cs, s.app, s.broken)
		return p == nil || p.DeletionTimestamp != nil // a kubelet would finish a graceful delete
	})
	testkit.EventuallyWithin(t, repairWait, "all pods handled", func() bool { return c.Checked() >= 3 })
	if n := c.Repaired(); n != 1 {
		t.Errorf("repaired %d pods, want 1", n)
	}
	untouched(t, cs, s)
}

// repairWait is how long the tests wait for the controller to act.
const repairWait = 20 * time.Second
