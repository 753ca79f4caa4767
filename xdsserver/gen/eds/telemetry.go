package eds

import (
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/baremesh/baremesh/core/model"
)

// defaultClusterID is the cluster istiod names its registries' endpoints
// after by default (CLUSTER_ID "Kubernetes"); baremesh's registry is one
// such cluster.
const defaultClusterID = "Kubernetes"

// AddWorkloadMetadata adds the endpoint's workload in istiod's compressed
// form, filter_metadata.istio.workload
// "WORKLOAD;NAMESPACE;CANONICAL_SERVICE;CANONICAL_REVISION;CLUSTER": a
// client's istio-proxy labels metrics with it when the server sends no
// peer metadata (no sidecar there, or the request never reached it).
// Other clients ignore filter_metadata they do not read.
func AddWorkloadMetadata(lb *endpointv3.LbEndpoint, ep *model.Endpoint) {
	name := ep.Workload.Name
	if n, ok := ep.Labels["service.istio.io/workload-name"]; ok {
		name = n
	}
	svc, rev := canonicalService(ep.Labels, name)
	if rev == "latest" {
		rev = "" // istiod leaves the default out
	}
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte(';')
	b.WriteString(ep.Workload.Namespace)
	b.WriteByte(';')
	b.WriteString(svc)
	b.WriteByte(';')
	b.WriteString(rev)
	b.WriteByte(';')
	b.WriteString(defaultClusterID)
	if lb.Metadata == nil {
		lb.Metadata = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{}}
	}
	lb.Metadata.FilterMetadata["istio"] = &structpb.Struct{Fields: map[string]*structpb.Value{"workload": structpb.NewStringValue(b.String())}}
}

// canonicalService is Istio's canonical service name and revision of a
// workload: the first label set of each list, else the workload's name
// and "latest".
func canonicalService(labels map[string]string, workload string) (name, rev string) {
	name, rev = workload, "latest"
	for _, k := range []string{"service.istio.io/canonical-name", "app.kubernetes.io/name", "app"} {
		if v, ok := labels[k]; ok {
			name = v
			break
		}
	}
	for _, k := range []string{"service.istio.io/canonical-revision", "app.kubernetes.io/version", "version"} {
		if v, ok := labels[k]; ok {
			rev = v
			break
		}
	}
	return name, rev
}
