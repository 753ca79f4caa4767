package rds

import (
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestWithMatchCopiesEveryField fills every field of a Route (one member
// per oneof) and checks that withMatch keeps all but the match, so a
// field route() starts to set cannot be lost on the routes that share it.
func TestWithMatchCopiesEveryField(t *testing.T) {
	r := &routev3.Route{}
	m := r.ProtoReflect()
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if od := fd.ContainingOneof(); od != nil && m.WhichOneof(od) != nil {
			continue
		}
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			l.Append(l.NewElement())
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			mp.Set(protoreflect.ValueOfString("k").MapKey(), mp.NewValue())
		case fd.Message() != nil:
			m.Set(fd, m.NewField(fd))
		case fd.Kind() == protoreflect.StringKind:
			m.Set(fd, protoreflect.ValueOfString("x"))
		default:
			t.Logf("field %s of kind %v left unset", fd.Name(), fd.Kind())
		}
	}
	match := &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/p"}}
	got := withMatch(r, match)
	want := proto.Clone(r).(*routev3.Route)
	want.Match = match
	if !proto.Equal(got, want) {
		t.Fatalf("withMatch lost fields:\n got %v\nwant %v", got, want)
	}
}
