package envoyfilter

import (
	"fmt"

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
				err = checkMessage(l.Get(i).Message(), fmt.Sprintf("%s[%d]", p, i), false)
			}
		case fd.IsMap():
			if fd.MapValue().Message() == nil {
				return true
			}
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				err = checkMessage(mv.Message(), fmt.Sprintf("%s[%v]", p, k.Interface()), false)
				return err == nil
			})
		default:
			err = checkMessage(v.Message(), p, false)
		}
		return err == nil
	})
	return err
}
