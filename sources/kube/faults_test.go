package kube_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/model"
)

// TestAPIServerRestartResyncsWithoutEvents restarts the API server under
// a synced source: the informers relist, and since nothing changed, the
// store raises no event and the model no change (so no push). While it
// is down the cluster is reported unreachable and keeps its state.
func TestAPIServerRestartResyncsWithoutEvents(t *testing.T) {
	c := cluster(t, "restart", true)
	ns := "restart"
	kubeObjects(t, c, ns, "10.244.2.5")
	applyYAML(t, c, `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: restart}
spec:
  host: reviews.restart.svc.cluster.local
  trafficPolicy: {connectionPool: {tcp: {maxConnections: 10}}}
`)
	dir := t.TempDir()
	writeKubeconfig(t, dir, "r", c.Kubeconfig(t, "restart", nil))
	e := startEnv(t, dir, fastOptions())
	sk := model.ServiceKey{Hostname: "reviews.restart.svc.cluster.local", Namespace: ns}
	poll(t, "the Service and the DestinationRule", func() bool {
		_, ok := e.agg.Get(config.DestinationRule, ns, "reviews")
		return ok && len(e.reg.Endpoints().Endpoints(sk)) == 4
	})
	events, _ := e.counts()
	changes := e.changesOutside("default")
	relisted := e.src.Status()[0].RelistedUnchanged

	c.StopAPIServer(t)
	poll(t, "the cluster reported unreachable", func() bool {
		st := e.src.Status()
		return len(st) == 1 && !st[0].Connected && strings.Contains(st[0].Error, "unreachable")
	})
	if len(e.reg.Endpoints().Endpoints(sk)) != 4 {
		t.Fatal("an unreachable cluster's endpoints were dropped")
	}
	if !hasProblem(e, "unreachable") {
		t.Fatalf("no problem reported for the unreachable cluster: %+v", e.agg.Problems())
	}
	c.StartAPIServer(t)
	poll(t, "the cluster reported reachable again", func() bool {
		st := e.src.Status()
		return len(st) == 1 && st[0].Connected
	})
	// A change after the restart proves the watches are back; it must be
	// the only event.
	_, err := c.Client.CoreV1().Services(ns).Create(context.Background(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "after", Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	applyYAML(t, c, `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: after, namespace: restart}
spec: {host: after.restart.svc.cluster.local}
`)
	restarted := time.Now()
	pollFor(t, 120*time.Second, "the Service and DestinationRule made after the restart", func() bool {
		_, ok := e.agg.Get(config.DestinationRule, ns, "after")
		return ok && hasService(e, "after.restart.svc.cluster.local")
	})
	t.Logf("watches resumed %v after the API server was back", time.Since(restarted).Round(time.Millisecond))
	// The API server takes its own address out of the "kubernetes"
	// Service's endpoints when it stops and puts it back when it starts:
	// real changes, in namespace default, not counted here.
	e2, _ := e.counts()
	c2 := e.changesOutside("default")
	if e2-events != 1 || c2-changes != 1 {
		t.Fatalf("across the restart: %d store events and %d model changes; want 1 and 1 (the new objects only)", e2-events, c2-changes)
	}
	if hasProblem(e, "unreachable") {
		t.Fatal("the unreachable problem was not cleared")
	}
	// The informers did relist: they replayed the unchanged objects.
	if n := e.src.Status()[0].RelistedUnchanged - relisted; n == 0 {
		t.Fatal("no informer relisted across the restart; the test proves nothing")
	} else {
		t.Logf("%d unchanged objects replayed by relists, 0 events from them", n)
	}
}

func hasService(e *env, host string) bool {
	for _, s := range e.reg.Services() {
		if s.Hostname == host {
			return true
		}
	}
	return false
}

func hasProblem(e *env, substr string) bool {
	for _, p := range e.agg.Problems() {
		if strings.Contains(p.Error, substr) {
			return true
		}
	}
	return false
}

// TestMulticlusterFiles runs two API servers: the same Service in both
// merges its endpoints; a bad kubeconfig is reported and leaves the
// others alone; an edited kubeconfig reconnects without a wipe; removing
// a file removes that cluster's endpoints only.
func TestMulticlusterFiles(t *testing.T) {
	a, b := cluster(t, "a", true), cluster(t, "b", false)
	ns := "multi"
	kubeObjects(t, a, ns, "10.1.0.5")
	kubeObjects(t, b, ns, "10.2.0.5")
	dir := t.TempDir()
	writeKubeconfig(t, dir, "east", a.Kubeconfig(t, "multi", nil))
	writeKubeconfig(t, dir, "west", b.Kubeconfig(t, "multi", nil))
	e := startEnv(t, dir, fastOptions())
	sk := model.ServiceKey{Hostname: "reviews.multi.svc.cluster.local", Namespace: ns}
	addrsOf := func() map[string]bool {
		out := map[string]bool{}
		for _, ep := range e.reg.Endpoints().Endpoints(sk) {
			out[ep.Address] = true
		}
		return out
	}
	poll(t, "endpoints of both clusters", func() bool { m := addrsOf(); return m["10.1.0.5"] && m["10.2.0.5"] })
	n := 0
	for _, s := range e.reg.Services() {
		if s.Namespace == ns {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("services in %s = %d, want 1 host for both clusters", ns, n)
	}

	// A bad kubeconfig: reported with its file, other clusters unaffected.
	bad := writeKubeconfig(t, dir, "broken", []byte("apiVersion: v1\nkind: Config\nclusters: [{name: x, cluster: {server: 'https://127.0.0.1:1'}}]\ncurrent-context: nope\n"))
	poll(t, "the bad kubeconfig reported", func() bool {
		for _, p := range e.agg.Problems() {
			if p.Origin == bad && strings.Contains(p.Error, "nope") {
				return true
			}
		}
		return false
	})
	if st := e.src.Status(); len(st) != 3 || st[0].ID != "broken" || st[0].Error == "" || !st[1].Connected || !st[2].Connected {
		t.Fatalf("status = %+v", st)
	}
	// Garbage over a good file keeps that cluster's connection.
	events, changes := e.counts()
	westFile := writeKubeconfig(t, dir, "west", []byte("{{{ not yaml"))
	poll(t, "the garbled kubeconfig reported", func() bool {
		for _, p := range e.agg.Problems() {
			if p.Origin == westFile {
				return true
			}
		}
		return false
	})
	// A new kubeconfig for west (a new user): reconnect, no wipe.
	writeKubeconfig(t, dir, "west", b.Kubeconfig(t, "multi-2", nil))
	poll(t, "west reconnected", func() bool {
		for _, p := range e.agg.Problems() {
			if p.Origin == westFile {
				return false
			}
		}
		for _, st := range e.src.Status() {
			if st.ID == "west" {
				return st.Synced && st.Connected
			}
		}
		return false
	})
	if e2, c2 := e.counts(); e2 != events || c2 != changes {
		t.Fatalf("reconnecting west raised %d events and %d model changes; want none", e2-events, c2-changes)
	}
	if m := addrsOf(); !m["10.2.0.5"] {
		t.Fatal("west's endpoints lost on reconnect")
	}

	// Removing west's file removes its endpoints, not east's.
	if err := os.Remove(westFile); err != nil {
		t.Fatal(err)
	}
	poll(t, "west's endpoints to go", func() bool { m := addrsOf(); return m["10.1.0.5"] && !m["10.2.0.5"] })
	if err := os.Remove(bad); err != nil {
		t.Fatal(err)
	}
	poll(t, "the bad file's problem to clear", func() bool {
		for _, p := range e.agg.Problems() {
			if p.Origin == bad {
				return false
			}
		}
		return len(e.src.Status()) == 1
	})
}

// TestIstioCRDsInstalledLater starts on a cluster without Istio's CRDs
// (not an error) and picks them up once installed.
func TestIstioCRDsInstalledLater(t *testing.T) {
	c := cluster(t, "b", false)
	dir := t.TempDir()
	writeKubeconfig(t, dir, "late", c.Kubeconfig(t, "late", nil))
	e := startEnv(t, dir, fastOptions())
	if st := e.src.Status(); len(st) != 1 || !st[0].Synced {
		t.Fatalf("a cluster without Istio CRDs should sync: %+v", st)
	}
	crds, err := kubetestCRDs()
	if err != nil {
		t.Fatal(err)
	}
	c.InstallCRDs(t, crds)
	ensureNamespace(t, c, "late", nil)
	applyYAML(t, c, `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: later, namespace: late}
spec:
  hosts: [later.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
`)
	poll(t, "a ServiceEntry of a CRD installed after start", func() bool {
		_, ok := e.agg.Get(config.ServiceEntry, "late", "later")
		return ok
	})
}
