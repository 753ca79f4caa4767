package istiodtest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m.Run) }

// TestStartApplyStop starts istiod over the test API server, writes a
// ServiceEntry twice (create, then replace), waits until istiod's config
// store holds the second version, and checks that Stop ends the process.
func TestStartApplyStop(t *testing.T) {
	i := Start(t, Options{})
	ctx := context.Background()
	if err := i.Namespace(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	if err := i.Namespace(ctx, "default"); err != nil {
		t.Fatalf("namespace that exists: %v", err)
	}
	se := func(port int64) map[string]any {
		return map[string]any{
			"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
			"metadata": map[string]any{"name": "a", "namespace": "default"},
			"spec": map[string]any{"hosts": []any{"a.example.com"}, "resolution": "DNS",
				"ports": []any{map[string]any{"number": port, "name": "http", "protocol": "HTTP"}}},
		}
	}
	if _, err := i.Apply(ctx, se(80)); err != nil {
		t.Fatal(err)
	}
	rv, err := i.Apply(ctx, se(8080))
	if err != nil {
		t.Fatalf("replace: %v", err)
	}
	testkit.EventuallyWithin(t, time.Minute, "istiod's store holds ServiceEntry default/a at version "+rv,
		func() bool { return configzHas(i, "ServiceEntry", "a", rv) })
	if _, err := i.Apply(ctx, map[string]any{"apiVersion": "networking.istio.io/v1", "kind": "NoSuchKind",
		"metadata": map[string]any{"name": "x", "namespace": "default"}}); err == nil || !strings.Contains(err.Error(), "NoSuchKind default/x") {
		t.Errorf("apply of an unknown kind: got %v, want an error naming NoSuchKind default/x", err)
	}
	pid := i.PID
	i.Stop()
	i.Stop() // idempotent
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("istiod (pid %d) still runs after Stop", pid)
	}
	if _, err := os.Stat(i.LogPath()); err != nil {
		t.Errorf("istiod's log: %v", err)
	}
}

// configzHas says whether istiod's /debug/configz lists kind default/name
// at resource version rv or later.
func configzHas(i *Istiod, kind, name, rv string) bool {
	resp, err := http.Get("http://" + i.DebugAddr + "/debug/configz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var list []struct {
		Kind     string                                            `json:"kind"`
		Metadata struct{ Name, Namespace, ResourceVersion string } `json:"metadata"`
	}
	if json.Unmarshal(b, &list) != nil {
		return false
	}
	for _, c := range list {
		if c.Kind == kind && c.Metadata.Namespace == "default" && c.Metadata.Name == name && atLeast(c.Metadata.ResourceVersion, rv) {
			return true
		}
	}
	return false
}

// atLeast compares resource versions as the numbers the test API server
// (etcd) gives them.
func atLeast(got, want string) bool {
	g, err1 := strconv.ParseUint(got, 10, 64)
	w, err2 := strconv.ParseUint(want, 10, 64)
	return err1 == nil && err2 == nil && g >= w
}
