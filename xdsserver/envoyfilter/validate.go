package envoyfilter

import (
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// check runs go-control-plane's ValidateAll on m and on every message
// packed in an Any inside it, recursively; an Any of a type this binary
// does not know is an error (it could not be checked).
func check(m proto.Message) error {
	return checkMessage(m.ProtoReflect(), string(m.ProtoReflect().Descriptor().FullName()), true)
}

type validator interface{ ValidateAll() error }

// checkMessage validates m when validate is set (ValidateAll covers the
// fields inside it, so they are walked only for the Anys they hold).
func checkMessage(m protoreflect.Message, path string, validate bool) error {
	if v, ok := m.Interface().(validator); ok && validate {
		if err := v.ValidateAll(); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			return fmt.Errorf("%s: unpacking %s: %w", path, a.GetTypeUrl(), err)
		}
		return checkMessage(inner.ProtoReflect(), path+"("+string(inner.ProtoReflect().Descriptor().FullName())+")", true)
	}
	// Only the fields whose type can hold an Any are walked (ValidateAll
	// covered the rest); reading them by descriptor is much cheaper than
	// ranging over a large message (a cluster has ~60 fields).
	for _, fd := range anyFields(m.Descriptor()) {
		if !m.Has(fd) {
			continue
		}
		v := m.Get(fd)
		p := path + "." + string(fd.Name())
		var err error
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = checkMessage(l.Get(i).Message(), fmt.Sprintf("%s[%d]", p, i), false)
			}
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				err = checkMessage(mv.Message(), fmt.Sprintf("%s[%v]", p, k.Interface()), false)
				return err == nil
			})
		default:
			err = checkMessage(v.Message(), p, false)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// anyFieldsCache caches anyFields by message full name.
var anyFieldsCache sync.Map

// anyFields are md's message fields (lists and maps of messages
// included) whose type can hold an Any.
func anyFields(md protoreflect.MessageDescriptor) []protoreflect.FieldDescriptor {
	if v, ok := anyFieldsCache.Load(md.FullName()); ok {
		return v.([]protoreflect.FieldDescriptor)
	}
	var out []protoreflect.FieldDescriptor
	fs := md.Fields()
	for i := 0; i < fs.Len(); i++ {
		fd := fs.Get(i)
		t := fd.Message()
		if fd.IsMap() {
			t = fd.MapValue().Message()
		}
		if t != nil && mayHoldAny(t) {
			out = append(out, fd)
		}
	}
	anyFieldsCache.Store(md.FullName(), out)
	return out
}

// anyName is google.protobuf.Any's full name.
var anyName = (&anypb.Any{}).ProtoReflect().Descriptor().FullName()

// holdsAny caches mayHoldAny by message full name.
var holdsAny sync.Map

// mayHoldAny reports whether a message of type md can hold an Any,
// itself or in a field at any depth: the walk skips the others.
func mayHoldAny(md protoreflect.MessageDescriptor) bool {
	if v, ok := holdsAny.Load(md.FullName()); ok {
		return v.(bool)
	}
	found := reachesAny(md, map[protoreflect.FullName]bool{})
	holdsAny.Store(md.FullName(), found)
	return found
}

func reachesAny(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if md.FullName() == anyName {
		return true
	}
	if seen[md.FullName()] {
		return false // explored already on this walk
	}
	seen[md.FullName()] = true
	fs := md.Fields()
	for i := 0; i < fs.Len(); i++ {
		fd := fs.Get(i)
		if fd.IsMap() {
			fd = fd.MapValue()
		}
		if fd.Message() != nil && reachesAny(fd.Message(), seen) {
			return true
		}
	}
	return false
}
