package install

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
)

// serviceAccountDir is where Kubernetes mounts a pod's service account.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// Kubeconfig is the plugin's kubeconfig (Options.Kubeconfig): the file at
// path, or, when path is empty, one made from the pod's service account
// (its token and CA, KUBERNETES_SERVICE_HOST and _PORT), as istio-cni's
// installer makes it.
func Kubeconfig(path string) ([]byte, error) {
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
		return b, nil
	}
	return inClusterKubeconfig(serviceAccountDir, os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
}

func inClusterKubeconfig(saDir, host, port string) ([]byte, error) {
	token, err := os.ReadFile(saDir + "/token")
	if host == "" || err != nil {
		return nil, errors.New("no kubeconfig file given and not running in a pod (no KUBERNETES_SERVICE_HOST or service account token)")
	}
	ca, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return nil, fmt.Errorf("service account CA: %w", err)
	}
	if port == "" {
		port = "443"
	}
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://%s
    certificate-authority-data: %s
users:
- name: baremesh-cni
  user:
    token: %s
contexts:
- name: baremesh-cni
  context: {cluster: local, user: baremesh-cni}
current-context: baremesh-cni
`, net.JoinHostPort(host, port), base64.StdEncoding.EncodeToString(ca), strings.TrimSpace(string(token)))), nil
}
