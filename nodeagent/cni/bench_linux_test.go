package cni

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baremesh/baremesh/nodeagent/nstest"
)

// BenchmarkCmdAdd measures one ADD as a runtime pays it: exec of the real
// baremesh-cni binary (built here without the race detector), kubeconfig
// load, a new TLS connection to the real API server (a CNI plugin is a
// new process per call, so no connection can be reused), the pod GET,
// and iptables-restore in the pod's namespace. 200 pods, one ADD each.
var benchRuns atomic.Int64

func BenchmarkCmdAdd(b *testing.B) {
	nstest.RequireRoot(b)
	nstest.RequireBinary(b, "iptables-nft-restore")
	cfg := kube(b)
	cs := clientset(b)
	dir := b.TempDir()
	bin := filepath.Join(dir, PluginName)
	// The plugin binary, by path from this package's directory.
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/baremesh-cni").CombinedOutput(); err != nil {
		b.Skipf("skipping: building baremesh-cni: %v: %s", err, out)
	}
	kc := filepath.Join(dir, "kubeconfig")
	writeKubeconfig(b, cfg, cfg.Host, kc)
	stdin := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"bench","type":"baremesh-cni","iptablesBackend":"nft",
 "kubernetes":{"kubeconfig":%q},
 "prevResult":{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"x"}],"ips":[{"interface":0,"address":"10.99.0.5/24"}]}}`, kc)
	const pods = 200
	benchRuns.Add(1)
	var lat []time.Duration
	for i := range pods {
		pod := nstest.New(b)
		name := fmt.Sprintf("bench-%d-%d", benchRuns.Load(), i) // the benchmark may run more than once
		createPod(b, cs, "bench", name, true, nil)
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "CNI_COMMAND=ADD", "CNI_CONTAINERID=c"+name, "CNI_NETNS=/var/run/netns/"+pod.Name,
			"CNI_IFNAME=eth0", "CNI_PATH="+dir, "CNI_ARGS=K8S_POD_NAMESPACE=bench;K8S_POD_NAME="+name)
		cmd.Stdin = bytes.NewReader([]byte(stdin))
		start := time.Now()
		out, err := cmd.CombinedOutput()
		lat = append(lat, time.Since(start))
		if err != nil {
			b.Fatalf("ADD %s: %v: %s", name, err, out)
		}
	}
	slices.Sort(lat)
	ms := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(ms(0.50), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
	b.Logf("cmdAdd over %d pods: p50 %.1f ms, p99 %.1f ms, max %.1f ms (new process and API connection per call)", pods, ms(0.5), ms(0.99), ms(1))
}
