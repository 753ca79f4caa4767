package onboard

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds"

	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/internal/daemon"
)

// TestPilotAgentXDSAndHealth runs Istio's pilot-agent proxyless
// (DISABLE_ENVOY): once it has its certificate, a grpc-go xDS client on
// the agent's local XDS socket makes the agent's xDS proxy dial
// baremeshd's TLS port with that certificate (authenticated xDS); the
// node (from the client's bootstrap) carries AUTO_REGISTER_GROUP, so the
// VM is auto-registered, and the agent's own health checker runs the
// group's tcpSocket probe and reports its health upstream (type
// istio.v1.HealthInformation): the entry turns healthy, then unhealthy
// when the probed port closes.
func TestPilotAgentXDSAndHealth(t *testing.T) {
	bins := istioBins(t)
	target, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	probePort := target.Addr().(*net.TCPAddr).Port
	go func() {
		for {
			c, err := target.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	cfgFile, d := testSetup(t, "registrationGrace: 2s\n")
	must(t, os.WriteFile(filepath.Join(filepath.Dir(cfgFile), "conf.d", "wg.yaml"), []byte(groupYAML+fmt.Sprintf(
		"  probe: {tcpSocket: {port: %d}, periodSeconds: 1, failureThreshold: 1, successThreshold: 1}\n", probePort)), 0o644))
	_, vm, _, env := prepareVMWhenGroupHasProbe(t, d, cfgFile)
	_, tlsPort, _ := net.SplitHostPort(d.TLSAddr())
	env["PROXY_CONFIG"] = fmt.Sprintf(`{"statusPort": %d, "discoveryAddress": "localhost:%s"}`, freePort(t), tlsPort)
	env["INSTANCE_IP"] = "127.0.0.1"
	agent := startAgent(t, bins, vm, env)
	_, waitIssued := certzOf(t, d)
	waitIssued(1, "the first certificate", 30*time.Second)

	sock := filepath.Join(vm, "etc", "istio", "proxy", "XDS")
	testkit.EventuallyWithin(t, 30*time.Second, "the agent's XDS socket", func() bool { _, err := os.Stat(sock); return err == nil })
	bootstrap := fmt.Sprintf(`{
  "xds_servers": [{"server_uri": "unix://%s", "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
  "node": {"id": "sidecar~127.0.0.1~reviews-vm.bookinfo~bookinfo.svc.cluster.local", "metadata": {"GENERATOR": "grpc", "NAMESPACE": "bookinfo", "AUTO_REGISTER_GROUP": "reviews"}}
}`, sock)
	res, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	must(t, err)
	cc, err := grpc.NewClient("xds:///reviews.bookinfo.svc.cluster.local:9080", grpc.WithResolvers(res), grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	defer cc.Close()
	cc.Connect()

	reg := func() map[string]any {
		var page struct {
			Registrations []map[string]any `json:"registrations"`
		}
		resp, err := http.Get("http://" + d.HTTPAddr() + "/debug/registrationz")
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		if json.NewDecoder(resp.Body).Decode(&page) != nil || len(page.Registrations) != 1 {
			return nil
		}
		return page.Registrations[0]
	}
	var last map[string]any
	defer func() {
		if t.Failed() {
			t.Logf("last registration: %v", last)
			if resp, err := http.Get("http://" + d.HTTPAddr() + "/metrics"); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				for _, l := range strings.Split(string(b), "\n") {
					if strings.Contains(l, "request") && !strings.HasPrefix(l, "#") {
						t.Log(l)
					}
				}
			}
		}
	}()
	testkit.EventuallyWithin(t, 30*time.Second, "registered through pilot-agent, reported healthy", func() bool {
		r := reg()
		last = r
		return r != nil && r["name"] == "reviews-127.0.0.1" && r["connected"] == true && r["health"] == "healthy"
	})
	var st any
	resp, err := http.Get("http://" + d.HTTPAddr() + "/debug/syncz")
	must(t, err)
	_ = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if b, _ := json.Marshal(st); !strings.Contains(string(b), "spiffe://cluster.local/ns/bookinfo/sa/reviews") {
		t.Fatalf("syncz: the agent's stream is not authenticated as reviews: %s", b)
	}
	target.Close()
	testkit.EventuallyWithin(t, 30*time.Second, "unhealthy once the probed port is closed", func() bool {
		r := reg()
		return r != nil && r["health"] == "unhealthy"
	})
	t.Logf("registration: %v", reg())
	agent.stop()
}

// prepareVMWhenGroupHasProbe lays out the VM (baremeshctl vm bootstrap
// reads the group file, so its mesh.yaml carries the probe) and checks
// that the probe is there.
func prepareVMWhenGroupHasProbe(t *testing.T, d *daemon.Daemon, cfgFile string) (string, string, string, map[string]string) {
	t.Helper()
	boot, vm, certs, env := prepareVM(t, d, cfgFile, time.Hour)
	mesh, err := os.ReadFile(filepath.Join(vm, "etc", "istio", "config", "mesh"))
	must(t, err)
	if !strings.Contains(string(mesh), "readinessProbe") {
		t.Fatalf("mesh.yaml has no readinessProbe:\n%s", mesh)
	}
	return boot, vm, certs, env
}
