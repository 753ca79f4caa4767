package deps

import (
	_ "github.com/containernetworking/cni/pkg/skel"
	_ "github.com/coreos/go-systemd/v22/daemon"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	_ "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/vishvananda/netlink"
	_ "github.com/vishvananda/netns"
	_ "google.golang.org/grpc"
	_ "google.golang.org/grpc/xds"
	_ "google.golang.org/protobuf/proto"
	_ "gopkg.in/yaml.v3"
	_ "istio.io/api/mesh/v1alpha1"
	_ "istio.io/api/networking/v1alpha3"
	_ "istio.io/api/security/v1beta1"
	_ "sigs.k8s.io/yaml"
)
