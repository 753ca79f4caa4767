package daemon

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	pb "istio.io/api/security/v1alpha1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/baremesh/baremesh/core/identity"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/sources/kube/kubetest"
)

// TestKubeTokenAuthenticatesToCA: a pod's service account token, issued
// by a real kube-apiserver (TokenRequest, audience istio-ca), gets that
// service account's certificate from the CA over gRPC (grpc-go, TLS),
// reviewed by the cluster the clusterid header names; the refusals each
// carry their own reason.
func TestKubeTokenAuthenticatesToCA(t *testing.T) {
	kc := kubetest.Start(t, false)
	t.Cleanup(kc.Stop)
	ctx := t.Context()
	const ns, sa = "shop", "cart"
	if _, err := kc.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := func(aud string) string {
		t.Helper()
		exp := int64(3600)
		tr, err := kc.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authnv1.TokenRequest{
			Spec: authnv1.TokenRequestSpec{Audiences: []string{aud}, ExpirationSeconds: &exp}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("TokenRequest: %v", err)
		}
		return tr.Status.Token
	}

	// baremeshd's user has only what examples/mixed-mesh/clusterrole.yaml
	// grants (reading, and system:auth-delegator for the reviews).
	rbac, err := os.ReadFile("../../examples/mixed-mesh/clusterrole.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(rbac), "\n---") {
		if strings.Contains(doc, "kind: ClusterRoleBinding") {
			var b rbacv1.ClusterRoleBinding
			if err := yaml.Unmarshal([]byte(doc), &b); err != nil {
				t.Fatal(err)
			}
			_, err = kc.Client.RbacV1().ClusterRoleBindings().Create(ctx, &b, metav1.CreateOptions{})
		} else {
			var r rbacv1.ClusterRole
			if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
				t.Fatal(err)
			}
			_, err = kc.Client.RbacV1().ClusterRoles().Create(ctx, &r, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	cfg := identityConfig(t)
	cfg.Clusters = t.TempDir()
	if err := os.WriteFile(filepath.Join(cfg.Clusters, "east.yaml"), kc.Kubeconfig(t, "baremesh", []string{}), 0o600); err != nil {
		t.Fatal(err)
	}
	d := runDaemon(t, cfg)

	root, err := os.ReadFile(filepath.Join(cfg.StateDir, "ca", identity.RootCertFile))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(root)
	conn, err := grpc.NewClient(d.TLSAddr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: "istiod.istio-system.svc"})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewIstioCertificateServiceClient(conn)
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	call := func(tok, cluster, id string) (*pb.IstioCertificateResponse, error) {
		u, _ := url.Parse(id)
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{u}}, k)
		if err != nil {
			t.Fatal(err)
		}
		md := []string{"authorization", "Bearer " + tok}
		if cluster != "" {
			md = append(md, "clusterid", cluster)
		}
		return client.CreateCertificate(metadata.AppendToOutgoingContext(ctx, md...), &pb.IstioCertificateRequest{
			Csr: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})), ValidityDuration: 3600})
	}
	want := "spiffe://cluster.local/ns/shop/sa/cart"
	good := token("istio-ca")
	testkit.Eventually(t, "cluster east known to the CA", func() bool { // (KubeStatus would race with Run)
		_, err := call(good, "east", want)
		return err == nil
	})
	for _, cluster := range []string{"east", "" /* the only cluster */, "Kubernetes" /* Istio's default ID: the only cluster */} {
		resp, err := call(good, cluster, want)
		if err != nil {
			t.Fatalf("clusterid %q: CreateCertificate: %v", cluster, err)
		}
		leaf, err := x509.ParseCertificate(pemBlock(t, resp.GetCertChain()[0]))
		if err != nil {
			t.Fatal(err)
		}
		if len(leaf.URIs) != 1 || leaf.URIs[0].String() != want {
			t.Fatalf("leaf is for %v, want %s", leaf.URIs, want)
		}
	}

	// A forged JWT: the right form and claims, a signature of nobody's.
	enc := base64.RawURLEncoding.EncodeToString
	forged := enc([]byte(`{"alg":"RS256","kid":"x"}`)) + "." +
		enc([]byte(`{"aud":["istio-ca"],"iss":"https://127.0.0.1","sub":"system:serviceaccount:shop:cart","exp":9999999999}`)) + "." + enc([]byte("not a signature"))
	for _, c := range []struct {
		name, tok, cluster, id string
		code                   codes.Code
		reason                 string
	}{
		{"another service account in the CSR", good, "east", "spiffe://cluster.local/ns/shop/sa/admin", codes.PermissionDenied, "identity_mismatch"},
		{"a token for another audience", token("vault"), "east", want, codes.Unauthenticated, "kube_token_audience"},
		{"a forged JWT", forged, "east", want, codes.Unauthenticated, "kube_token_invalid"},
		{"an unknown cluster", good, "west", want, codes.Unauthenticated, "kube_cluster_unknown"},
		{"not a JWT nor a join token", "a.b.c", "east", want, codes.Unauthenticated, "token_malformed"},
	} {
		_, err := call(c.tok, c.cluster, c.id)
		if status.Code(err) != c.code || !strings.HasPrefix(status.Convert(err).Message(), c.reason+":") {
			t.Errorf("%s: got %v, want %v %s", c.name, err, c.code, c.reason)
		}
	}
	if code, body := get(t, "http://"+d.HTTPAddr()+"/metrics"); code != 200 || !strings.Contains(body, `baremesh_ca_certs_issued_total{method="kube-token"} 4`) {
		t.Errorf("metrics: %d; kube-token issues not counted: %s", code, grepLines(body, "baremesh_ca_"))
	}

	// The API server gone: the review fails, retryably (Unavailable).
	kc.StopAPIServer(t)
	if _, err := call(good, "east", want); status.Code(err) != codes.Unavailable || !strings.HasPrefix(status.Convert(err).Message(), "kube_review_failed:") {
		t.Errorf("API server down: got %v, want Unavailable kube_review_failed", err)
	}
}

func pemBlock(t *testing.T, s string) []byte {
	t.Helper()
	b, _ := pem.Decode([]byte(s))
	if b == nil {
		t.Fatalf("not PEM: %q", s)
	}
	return b.Bytes
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
