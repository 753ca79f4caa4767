package kube_test

import (
	"errors"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/baremesh/baremesh/core/identity"
	"github.com/baremesh/baremesh/sources/kube"
	"github.com/baremesh/baremesh/sources/kube/kubetest"
)

// TestTokenReviewer: with two real API servers, a service account token
// is reviewed by the cluster the caller names (the other cluster does not
// know its signer), the audiences are settable, a caller naming no cluster
// is refused when there are several, and a join token is left to the
// join token authenticator.
func TestTokenReviewer(t *testing.T) {
	a, b := cluster(t, "a", true), cluster(t, "b", false)
	dir := t.TempDir()
	writeKubeconfig(t, dir, "a", a.Kubeconfig(t, "baremesh-tr", nil))
	writeKubeconfig(t, dir, "b", b.Kubeconfig(t, "baremesh-tr", nil))
	e := startEnv(t, dir, fastOptions())
	poll(t, "two clusters", func() bool { return len(e.src.ClusterIDs()) == 2 })

	tok := func(c *kubetest.Cluster, aud string) string {
		t.Helper()
		ctx := t.Context()
		ensureNamespace(t, c, "tr", nil)
		_, err := c.Client.CoreV1().ServiceAccounts("tr").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		tr, err := c.Client.CoreV1().ServiceAccounts("tr").CreateToken(ctx, "web", &authnv1.TokenRequest{
			Spec: authnv1.TokenRequestSpec{Audiences: []string{aud}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("TokenRequest: %v", err)
		}
		return tr.Status.Token
	}
	r := &kube.TokenReviewer{Clusters: e.src, TrustDomain: func() string { return "corp.example" }, Audiences: []string{"bm-test"}}
	review := func(token, clusterID string) (*identity.Caller, error) {
		return r.Authenticate(t.Context(), identity.Credentials{BearerToken: token, ClusterID: clusterID})
	}

	fromA := tok(a, "bm-test")
	caller, err := review(fromA, "a")
	if err != nil {
		t.Fatalf("cluster a's token reviewed by a: %v", err)
	}
	if caller.ID.String() != "spiffe://corp.example/ns/tr/sa/web" || caller.Method != identity.MethodKubeToken || caller.Detail != "a" {
		t.Fatalf("caller %+v", caller)
	}
	for _, c := range []struct {
		name, token, cluster string
		want                 error
	}{
		{"a's token reviewed by b", fromA, "b", identity.ErrKubeTokenInvalid},
		{"no clusterid with two clusters", fromA, "", identity.ErrKubeClusterUnknown},
		{"the default audience, not the configured one", tok(a, kube.DefaultTokenAudience), "a", identity.ErrKubeTokenAudience},
		{"a join token", "bmt1.0123456789abcdef.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "a", identity.ErrNoCredentials},
		{"no token", "", "a", identity.ErrNoCredentials},
	} {
		if _, err := review(c.token, c.cluster); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := review(tok(b, "bm-test"), "b"); err != nil {
		t.Errorf("cluster b's token reviewed by b: %v", err)
	}
}
