package cni

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// KubeSource reads pods and namespaces with plain GETs over the
// kubeconfig's transport. It avoids client-go's typed clientset on
// purpose: registering every API group's scheme costs each plugin
// invocation (a new process) several milliseconds before the first byte.
type KubeSource struct {
	host   string
	client *http.Client
}

var _ PodSource = (*KubeSource)(nil)

// NewKubeSource reads the kubeconfig named in cfg.
func NewKubeSource(cfg *PluginConfig) (PodSource, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubernetes.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", cfg.Kubernetes.Kubeconfig, err)
	}
	return NewKubeSourceFor(rc, cfg.LookupTimeout())
}

// NewKubeSourceFor uses a rest.Config directly.
func NewKubeSourceFor(rc *rest.Config, timeout time.Duration) (*KubeSource, error) {
	rc = rest.CopyConfig(rc)
	rc.UserAgent = PluginName
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client for %s: %w", rc.Host, err)
	}
	hc.Timeout = timeout
	host := rc.Host
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	return &KubeSource{host: strings.TrimSuffix(host, "/") + rc.APIPath, client: hc}, nil
}

// Pod implements PodSource, retrying transient failures until ctx ends.
func (k *KubeSource) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	var pod corev1.Pod
	err := k.get(ctx, "/api/v1/namespaces/"+url.PathEscape(namespace)+"/pods/"+url.PathEscape(name), &pod)
	return &pod, err
}

// Namespace implements PodSource.
func (k *KubeSource) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	var ns corev1.Namespace
	err := k.get(ctx, "/api/v1/namespaces/"+url.PathEscape(name), &ns)
	return &ns, err
}

var errPermanent = errors.New("permanent")

func (k *KubeSource) get(ctx context.Context, path string, into any) error {
	backoff := 50 * time.Millisecond
	for {
		err := k.getOnce(ctx, path, into)
		if err == nil || errors.Is(err, errPermanent) || errors.Is(err, ErrPodNotFound) {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("GET %s: giving up after %v: %w", path, ctx.Err(), err)
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}

func (k *KubeSource) getOnce(ctx context.Context, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.host+path, nil)
	if err != nil {
		return fmt.Errorf("%w: %w", errPermanent, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", k.host+path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("GET %s: reading body: %w", path, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("GET %s: %w", path, ErrPodNotFound)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%w: GET %s: %s: %s", errPermanent, path, resp.Status, snippet(body))
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, snippet(body))
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("%w: GET %s: decoding: %w", errPermanent, path, err)
	}
	return nil
}

func snippet(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return strings.TrimSpace(string(b))
}
