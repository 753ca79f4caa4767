// Package gentest is test support for the generators: Validate runs
// go-control-plane's ValidateAll on every generated resource and on every
// Any packed inside it, recursively; Scenario builds a PushContext from a
// directory of YAML without the file source; Golden compares generated
// resources with protojson golden files; MustBuild, Node, Run and
// ByName are the unit tests' set-up (build, parse a node, generate and
// validate, index by name).
//
// It imports core, xdsserver/gen and external modules only.
package gentest

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	// Every extension the generators pack into an Any, so the global
	// registry can unpack it.
	_ "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/http_inspector/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/least_request/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/wrr_locality/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"

	"github.com/baremesh/baremesh/xdsserver/gen"
)

// validator is what go-control-plane's generated validation adds.
type validator interface {
	ValidateAll() error
}

// Validate fails t for every resource, or Any inside one, that does not
// pass ValidateAll, or whose Any cannot be unpacked.
func Validate(t testing.TB, resources []gen.Resource) {
	t.Helper()
	for _, r := range resources {
		if err := Check(r.Resource); err != nil {
			t.Errorf("resource %q: %v", r.Name, err)
		}
	}
}

// Check validates m and every Any found in it, recursively. It returns
// the first problem, its path in the message included.
func Check(m proto.Message) error {
	return check(m.ProtoReflect(), string(m.ProtoReflect().Descriptor().FullName()))
}

func check(m protoreflect.Message, path string) error {
	if v, ok := m.Interface().(validator); ok {
		if err := v.ValidateAll(); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := anypb.UnmarshalNew(a, proto.UnmarshalOptions{})
		if err != nil {
			return fmt.Errorf("%s: unpacking %s: %w", path, a.GetTypeUrl(), err)
		}
		return check(inner.ProtoReflect(), path+"("+string(inner.ProtoReflect().Descriptor().FullName())+")")
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Message() == nil {
			return true
		}
		p := path + "." + string(fd.Name())
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = check(l.Get(i).Message(), fmt.Sprintf("%s[%d]", p, i))
			}
		case fd.IsMap():
			if fd.MapValue().Message() == nil {
				return true
			}
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				err = check(mv.Message(), p+"["+k.String()+"]")
				return err == nil
			})
		default:
			err = check(v.Message(), p)
		}
		return err == nil
	})
	return err
}
