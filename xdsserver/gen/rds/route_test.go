package rds

import (
	"strconv"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestCopyWithMatchCopiesEveryField fills every field of a Route (one member
// per oneof) and checks that copyWithMatch keeps all but the match, so a
// field route() starts to set cannot be lost on the routes that share it.
func TestCopyWithMatchCopiesEveryField(t *testing.T) {
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
	got := &routev3.Route{}
	copyWithMatch(got, r, match)
	want := proto.Clone(r).(*routev3.Route)
	want.Match = match
	if !proto.Equal(got, want) {
		t.Fatalf("copyWithMatch lost fields:\n got %v\nwant %v", got, want)
	}
}

// TestParsePort checks parsePort against strconv.ParseUint.
func TestParsePort(t *testing.T) {
	for _, s := range []string{"", "0", "80", "080", "00000000000080", "65535", "4294967295", "4294967296", "99999999999999999999999", "+80", "-1", "8a", "a", "1_000", " 80", "reviews:80"} {
		want, err := strconv.ParseUint(s, 10, 32)
		got, ok := parsePort(s)
		if ok != (err == nil) || (ok && uint64(got) != want) {
			t.Errorf("parsePort(%q) = %d, %v; ParseUint gives %d, %v", s, got, ok, want, err)
		}
	}
}
