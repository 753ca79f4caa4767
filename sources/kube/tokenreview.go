package kube

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/baremesh/baremesh/core/identity"
)

// DefaultTokenAudience is the audience a pod's agent asks its service
// account token for (Istio's default, istio-ca).
const DefaultTokenAudience = "istio-ca"

// istioDefaultClusterID is the cluster ID Istio's agent sends when none
// was configured (its CLUSTER_ID default).
const istioDefaultClusterID = "Kubernetes"

// ClusterClients finds the client of a cluster by ID. *Source implements
// it.
type ClusterClients interface {
	// ClusterClient returns the cluster's client, or nil. With id "" (or
	// Istio's default "Kubernetes" not matching a cluster) it returns the
	// only cluster, when there is exactly one.
	ClusterClient(id string) (client kubernetes.Interface, resolved string)
	// ClusterIDs lists the clusters, for error messages.
	ClusterIDs() []string
}

// ClusterClient implements ClusterClients.
func (s *Source) ClusterClient(id string) (kubernetes.Interface, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.clusters[id]; c != nil {
		return c.cs, id
	}
	if (id == "" || id == istioDefaultClusterID) && len(s.clusters) == 1 {
		for cid, c := range s.clusters {
			return c.cs, cid
		}
	}
	return nil, ""
}

// ClusterIDs implements ClusterClients.
func (s *Source) ClusterIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.clusters))
	for id := range s.clusters {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// TokenReviewer authenticates a pod's agent by its Kubernetes service
// account token, as istiod's KubeJWTAuthenticator: the token is reviewed
// (authentication.k8s.io/v1 TokenReview) by the cluster the caller names
// in its "clusterid" header (Credentials.ClusterID; without it, the only
// cluster), for the audiences; the caller is the reviewed user
// system:serviceaccount:NS:SA in the mesh's trust domain. A bearer token
// that is not a JWT (a join token) is left to the next authenticator.
type TokenReviewer struct {
	Clusters    ClusterClients
	TrustDomain func() string
	// Audiences the token must be for; empty: DefaultTokenAudience.
	Audiences []string
	// Timeout bounds one review; 0: 10 s.
	Timeout time.Duration
}

var _ identity.Authenticator = (*TokenReviewer)(nil)

// Authenticate implements identity.Authenticator. Refusals: the token not
// authenticated (ErrKubeTokenInvalid), for another audience
// (ErrKubeTokenAudience), not a service account's (ErrKubeTokenNotSA), an
// unknown cluster (ErrKubeClusterUnknown); the API server unreachable or
// refusing the review is ErrKubeReviewFailed (retryable).
func (r *TokenReviewer) Authenticate(ctx context.Context, creds identity.Credentials) (*identity.Caller, error) {
	if !identity.LooksLikeJWT(creds.BearerToken) {
		return nil, identity.ErrNoCredentials
	}
	client, cid := r.Clusters.ClusterClient(creds.ClusterID)
	if client == nil {
		return nil, fmt.Errorf("%w: caller says cluster %q; clusters are %v (one cluster is chosen without the clusterid header only when it is the only one)",
			identity.ErrKubeClusterUnknown, creds.ClusterID, r.Clusters.ClusterIDs())
	}
	auds := r.Audiences
	if len(auds) == 0 {
		auds = []string{DefaultTokenAudience}
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tr, err := client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: creds.BearerToken, Audiences: auds},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("%w: cluster %q: %v", identity.ErrKubeReviewFailed, cid, err)
	}
	st := tr.Status
	if !st.Authenticated {
		if claimed := unverifiedAudiences(creds.BearerToken); claimed != nil && !intersects(claimed, auds) {
			return nil, fmt.Errorf("%w: cluster %q: token is for %v, want one of %v", identity.ErrKubeTokenAudience, cid, claimed, auds)
		}
		return nil, fmt.Errorf("%w: cluster %q: %s", identity.ErrKubeTokenInvalid, cid, st.Error)
	}
	if len(st.Audiences) > 0 && !intersects(st.Audiences, auds) { // an authenticator that ignores spec.audiences
		return nil, fmt.Errorf("%w: cluster %q: token is for %v, want one of %v", identity.ErrKubeTokenAudience, cid, st.Audiences, auds)
	}
	parts := strings.Split(st.User.Username, ":")
	if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" || parts[2] == "" || parts[3] == "" {
		return nil, fmt.Errorf("%w: cluster %q: user %q", identity.ErrKubeTokenNotSA, cid, st.User.Username)
	}
	return &identity.Caller{
		ID:     identity.ID{TrustDomain: r.TrustDomain(), Namespace: parts[2], ServiceAccount: parts[3]},
		Method: identity.MethodKubeToken, Detail: cid,
	}, nil
}

// unverifiedAudiences reads a JWT's aud claim without verifying anything,
// only to name why a token the API server refused was refused; nil when
// it has none or cannot be read.
func unverifiedAudiences(token string) []string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil
	}
	var claims struct {
		Aud json.RawMessage `json:"aud"`
	}
	if json.Unmarshal(b, &claims) != nil || len(claims.Aud) == 0 {
		return nil
	}
	var one string
	if json.Unmarshal(claims.Aud, &one) == nil {
		return []string{one}
	}
	var many []string
	if json.Unmarshal(claims.Aud, &many) == nil {
		return many
	}
	return nil
}

func intersects(a, b []string) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}
