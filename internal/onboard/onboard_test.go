package onboard

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// ctl runs a baremeshctl identity command in-process.
func ctl(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	rc := Main(args, &out, &errOut)
	return rc, out.String(), errOut.String()
}

func TestTokenCommands(t *testing.T) {
	state := t.TempDir()
	rc, _, _ := ctl("token", "create", "--config", "/nonexistent/x.yaml", "--namespace", "a", "--service-account", "b")
	if rc != 1 {
		t.Fatalf("explicit missing config: rc %d", rc)
	}
	rc, tok, stderr := ctl("token", "create", "--state-dir", state, "--namespace", "bar", "--service-account", "vm-sa", "--group", "g", "--ttl", "2h", "--uses", "3")
	if rc != 0 || !strings.HasPrefix(tok, "bmt1.") {
		t.Fatalf("create: %d %q %q", rc, tok, stderr)
	}
	id := strings.Split(tok, ".")[1]
	rc, list, _ := ctl("token", "list", "--state-dir", state)
	if rc != 0 || !strings.Contains(list, id) || !strings.Contains(list, "0/3") || !strings.Contains(list, "valid") {
		t.Fatalf("list: %d\n%s", rc, list)
	}
	if rc, out, _ := ctl("token", "revoke", id, "--state-dir", state); rc != 0 || !strings.Contains(out, "revoked "+id) {
		t.Fatalf("revoke: %d %s", rc, out)
	}
	if _, list, _ := ctl("token", "list", "--state-dir", state); !strings.Contains(list, "revoked") {
		t.Fatalf("list after revoke:\n%s", list)
	}
	if rc, _, stderr := ctl("token", "revoke", "--state-dir", state, "0123456789abcdef"); rc != 1 || !strings.Contains(stderr, "join token unknown: 0123456789abcdef") {
		t.Fatalf("revoke unknown: %d %s", rc, stderr)
	}
	for _, args := range [][]string{
		{"token", "create", "--state-dir", state, "--namespace", "bar"},
		{"token", "revoke", "--state-dir", state},
		{"token", "nope"},
		{"vm", "bootstrap", "--state-dir", state, "--namespace", "bar"},
	} {
		if rc, _, _ := ctl(args...); rc != 2 {
			t.Errorf("%v: rc %d, want 2 (usage)", args, rc)
		}
	}
	if rc, _, stderr := ctl("token", "create", "--state-dir", state, "--namespace", "Bad_NS", "--service-account", "x"); rc != 1 || !strings.Contains(stderr, "Bad_NS") {
		t.Fatalf("bad namespace: %d %s", rc, stderr)
	}
}

// As root (baremeshctl on the control host), files the token store makes
// belong to the state directory's owner, so the daemon's user can update
// them.
func TestTokenFilesOwnedByStateDirOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: checks that root-made token files go to the state directory's owner")
	}
	state := t.TempDir()
	must(t, os.Chown(state, 4321, 4321))
	if rc, _, stderr := ctl("token", "create", "--state-dir", state, "--namespace", "a", "--service-account", "b"); rc != 0 {
		t.Fatal(stderr)
	}
	for _, p := range []string{"tokens", "tokens/tokens.json", "tokens/tokens.lock"} {
		st, err := os.Stat(filepath.Join(state, p))
		must(t, err)
		if s := st.Sys().(*syscall.Stat_t); s.Uid != 4321 || s.Gid != 4321 || st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: owner %d:%d mode %v, want 4321:4321 and no group/other access", p, s.Uid, s.Gid, st.Mode())
		}
	}
}

func TestVMBootstrapFiles(t *testing.T) {
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "conf.d", "wg.yaml"), []byte(groupYAML+"  probe:\n    httpGet: {port: 8080}\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "mesh.yaml"), []byte("trustDomain: example.org\ndefaultConfig:\n  proxyMetadata: {FROM_MESH: x}\n"), 0o644))
	cfg := filepath.Join(dir, "baremesh.yaml")
	must(t, os.WriteFile(cfg, []byte("configDirs: [conf.d]\nmeshConfig: mesh.yaml\nstateDir: state\ntlsAddr: :15012\n"), 0o644))

	out := filepath.Join(dir, "out")
	rc, _, stderr := ctl("vm", "bootstrap", "--config", cfg, "--namespace", "bookinfo", "--group", "reviews", "--out", out)
	if rc != 1 || !strings.Contains(stderr, "CA root") {
		t.Fatalf("before the daemon made its CA: %d %s", rc, stderr)
	}
	must(t, os.MkdirAll(filepath.Join(dir, "state", "ca"), 0o700))
	must(t, os.WriteFile(filepath.Join(dir, "state", "ca", "root-cert.pem"), []byte("ROOT\n"), 0o644))
	if rc, _, stderr := ctl("vm", "bootstrap", "--config", cfg, "--namespace", "bookinfo", "--group", "nope", "--out", out); rc != 1 ||
		!strings.Contains(stderr, "WorkloadGroup bookinfo/nope not found in the config directories "+filepath.Join(dir, "conf.d")) {
		t.Fatalf("unknown group: %d %s", rc, stderr)
	}
	// Registration is the default (no --autoregister), so a VM onboarded as
	// the README says gets its WorkloadEntry and its health counts.
	rc, _, stderr = ctl("vm", "bootstrap", "--config", cfg, "--namespace", "bookinfo", "--group", "reviews", "--out", out,
		"--address", "mesh.example.org:443")
	if rc != 0 {
		t.Fatalf("bootstrap: %d %s", rc, stderr)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(out, name))
		must(t, err)
		return string(b)
	}
	wantEnv := `CANONICAL_REVISION='v3'
CANONICAL_SERVICE='reviews'
CA_ADDR='mesh.example.org:443'
FROM_MESH='x'
ISTIO_INBOUND_PORTS='9080'
ISTIO_LOCAL_EXCLUDE_PORTS='22,15090,15021,15020'
ISTIO_METAJSON_LABELS='{"app":"reviews","service.istio.io/canonical-name":"reviews","service.istio.io/canonical-revision":"v3","version":"v3"}'
ISTIO_META_AUTO_REGISTER_GROUP='reviews'
ISTIO_META_CLUSTER_ID='Kubernetes'
ISTIO_META_DNS_CAPTURE='true'
ISTIO_META_MESH_ID=''
ISTIO_META_NETWORK=''
ISTIO_META_POD_PORTS='[{"name":"http","containerPort":9080}]'
ISTIO_META_WORKLOAD_NAME='reviews'
ISTIO_NAMESPACE='bookinfo'
ISTIO_SERVICE='reviews.bookinfo'
ISTIO_SERVICE_CIDR='*'
POD_NAMESPACE='bookinfo'
SERVICE_ACCOUNT='reviews'
TRUST_DOMAIN='example.org'
`
	if got := read("cluster.env"); got != wantEnv {
		t.Errorf("cluster.env:\n%s\nwant:\n%s", got, wantEnv)
	}
	mesh := read("mesh.yaml")
	for _, want := range []string{"discoveryAddress: mesh.example.org:443", "TRUST_DOMAIN: example.org", "readinessProbe:\n    httpGet:\n      port: 8080"} {
		if !strings.Contains(mesh, want) {
			t.Errorf("mesh.yaml lacks %q:\n%s", want, mesh)
		}
	}
	if read("hosts") != "" || read("root-cert.pem") != "ROOT\n" || !strings.HasPrefix(read("istio-token"), "bmt1.") {
		t.Errorf("hosts %q root %q token %q", read("hosts"), read("root-cert.pem"), read("istio-token"))
	}
	if st, _ := os.Stat(filepath.Join(out, "istio-token")); st.Mode().Perm() != 0o600 {
		t.Errorf("istio-token mode %v", st.Mode())
	}
}
