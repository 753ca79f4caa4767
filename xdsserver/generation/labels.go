package generation

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/push"
)

// labelKeys is, per snapshot, the label keys of a proxy that some config
// may select it by outside what it serves (labelKeysRead).
type labelKeys struct {
	mu   sync.Mutex
	push uint64
	keys map[string]bool
	// bySpec: each config's keys, by its spec (specs are shared between
	// snapshots and never altered): walking 10,000 configs' specs took
	// 50 ms, once per snapshot.
	bySpec map[proto.Message][]string
}

// read returns labelKeysRead of pc, worked out once per snapshot.
func (l *labelKeys) read(pc *push.PushContext) map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keys == nil || l.push != pc.Version {
		l.push = pc.Version
		l.keys, l.bySpec = labelKeysRead(pc, l.bySpec)
	}
	return l.keys
}

// sharedLabels is canonicalLabels of those of labels whose key some
// config may read (labelKeysRead): what a sidecar's shared LDS and CDS
// and its RDS may depend on of its labels. The labels that only a
// ServiceEntry's workloadSelector matches (an auto-registered VM's app
// label) choose what the proxy serves, its inbound side, and nothing
// else: VMs of different services share the rest.
func (b *Builder) sharedLabels(pc *push.PushContext, labels map[string]string) string {
	keys := b.labels.read(pc)
	kept := make(map[string]string, len(labels))
	for k, v := range labels {
		if keys[k] {
			kept[k] = v
		}
	}
	return canonicalLabels(kept)
}

// byName are the proxy labels generators read by name (lds/tracing.go,
// lds/grpc.go, envoyfilter's gateway match).
var byName = []string{"service.istio.io/canonical-name", "service.istio.io/canonical-revision",
	"security.istio.io/tlsMode", "gateway.networking.k8s.io/gateway-name"}

// labelKeysRead is the label keys that a selector of some config of pc
// matches on (a workloadSelector, a selector's matchLabels, a Gateway's
// selector, a VirtualService's sourceLabels), that a locality failover
// priority names (DestinationRules, the mesh config), and those in
// byName. ServiceEntries, WorkloadEntries and WorkloadGroups are left
// out, and DestinationRule subsets' labels: they choose endpoints (what
// a proxy serves, scope.Inbound, or where traffic goes), not how a proxy
// is configured. The specs are
// walked by field name, so a new kind's selector is counted without
// being listed here.
//
// prev is the keys of each config's spec from an earlier call; the
// returned map is those of pc's.
func labelKeysRead(pc *push.PushContext, prev map[proto.Message][]string) (map[string]bool, map[proto.Message][]string) {
	keys := map[string]bool{}
	for _, k := range byName {
		keys[k] = true
	}
	bySpec := make(map[proto.Message][]string, len(prev))
	for _, kind := range config.Kinds() {
		switch kind {
		case config.ServiceEntry, config.WorkloadEntry, config.WorkloadGroup:
			continue
		}
		for _, c := range pc.Configs(kind) {
			if c.Spec == nil {
				continue
			}
			ks, ok := prev[c.Spec]
			if !ok {
				found := map[string]bool{}
				walkLabelKeys(c.Spec.ProtoReflect(), found)
				ks = slices.Collect(maps.Keys(found))
			}
			bySpec[c.Spec] = ks
			for _, k := range ks {
				keys[k] = true
			}
		}
	}
	if pc.Mesh != nil {
		walkLabelKeys(pc.Mesh.ProtoReflect(), keys)
	}
	return keys, bySpec
}

// walkLabelKeys adds to keys the keys of m's label maps and the label
// names of its failover priorities, at any depth.
func walkLabelKeys(m protoreflect.Message, keys map[string]bool) {
	subset := m.Descriptor().FullName() == "istio.networking.v1alpha3.Subset" // its labels choose endpoints
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapKey().Kind() == protoreflect.StringKind && fd.MapValue().Kind() == protoreflect.StringKind {
				if subset {
					return true
				}
				switch fd.Name() {
				case "labels", "match_labels", "source_labels", "selector":
					v.Map().Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
						keys[k.String()] = true
						return true
					})
				}
			} else if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(_ protoreflect.MapKey, e protoreflect.Value) bool {
					walkLabelKeys(e.Message(), keys)
					return true
				})
			}
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				switch {
				case fd.Kind() == protoreflect.MessageKind:
					walkLabelKeys(l.Get(i).Message(), keys)
				case fd.Kind() == protoreflect.StringKind && fd.Name() == "failover_priority":
					name, _, _ := strings.Cut(l.Get(i).String(), "=")
					keys[name] = true
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			walkLabelKeys(v.Message(), keys)
		}
		return true
	})
}
