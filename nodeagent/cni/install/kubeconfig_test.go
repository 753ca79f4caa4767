package install

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// TestInClusterKubeconfig: made from a service account directory, the
// kubeconfig loads with client-go and names the API server (port 443 by
// default), the CA and the token; without a token or host it is an
// error; a file given is read as it is.
func TestInClusterKubeconfig(t *testing.T) {
	sa := t.TempDir()
	for name, content := range map[string]string{"token": "tok-123\n", "ca.crt": "-----BEGIN CERTIFICATE-----\n"} {
		if err := os.WriteFile(filepath.Join(sa, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ host, port, server string }{
		{"10.96.0.1", "", "https://10.96.0.1:443"},
		{"fd00::1", "6443", "https://[fd00::1]:6443"},
	} {
		b, err := inClusterKubeconfig(sa, tc.host, tc.port)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.Load(b)
		if err != nil {
			t.Fatalf("client-go cannot load the kubeconfig: %v\n%s", err, b)
		}
		ctx := cfg.Contexts[cfg.CurrentContext]
		if ctx == nil || cfg.Clusters[ctx.Cluster].Server != tc.server || cfg.AuthInfos[ctx.AuthInfo].Token != "tok-123" ||
			string(cfg.Clusters[ctx.Cluster].CertificateAuthorityData) != "-----BEGIN CERTIFICATE-----\n" {
			t.Errorf("host %s port %q: kubeconfig\n%s", tc.host, tc.port, b)
		}
	}
	if _, err := inClusterKubeconfig(sa, "", ""); err == nil || !strings.Contains(err.Error(), "not running in a pod") {
		t.Errorf("no host: %v", err)
	}
	if _, err := inClusterKubeconfig(t.TempDir(), "10.96.0.1", ""); err == nil {
		t.Error("no token: no error")
	}
	given := filepath.Join(t.TempDir(), "kc")
	if err := os.WriteFile(given, []byte("apiVersion: v1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := Kubeconfig(given); err != nil || string(b) != "apiVersion: v1\n" {
		t.Errorf("given file: %q %v", b, err)
	}
	if _, err := Kubeconfig(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "kubeconfig") {
		t.Errorf("missing file: %v", err)
	}
}
