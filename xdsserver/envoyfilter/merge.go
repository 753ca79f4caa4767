package envoyfilter

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	networking "istio.io/api/networking/v1alpha3"
)

// mergeValue merges src into dst as istiod's MERGE does: proto merge
// semantics (scalars set, messages merged, lists appended, maps merged),
// except that a Duration is replaced whole and, for
// MERGE_AND_REPLACE_LIST, a list in src replaces dst's.
func mergeValue(op networking.EnvoyFilter_Patch_Operation, dst, src proto.Message) error {
	return mergeWith(op, dst, src, nil)
}

// mergeWith is mergeValue with the Duration fields of src known
// (durationPaths of src; nil: found by walking src).
func mergeWith(op networking.EnvoyFilter_Patch_Operation, dst, src proto.Message, durations [][]protoreflect.FieldDescriptor) error {
	d, s := dst.ProtoReflect(), src.ProtoReflect()
	if d.Descriptor().FullName() != s.Descriptor().FullName() {
		return fmt.Errorf("cannot merge a %s into a %s", s.Descriptor().FullName(), d.Descriptor().FullName())
	}
	if op == networking.EnvoyFilter_Patch_MERGE_AND_REPLACE_LIST {
		mergeMessage(d, s, true)
		return nil
	}
	// Without list replacement, proto.Merge does what istiod's merge
	// does (scalars set, messages merged, lists appended, map entries
	// replaced) except for Durations, which istiod replaces whole: those
	// in src are put back afterwards.
	proto.Merge(dst, src)
	if durations == nil {
		durations = durationPaths(s)
	}
	for _, path := range durations {
		dm, sm := d, s
		for _, fd := range path[:len(path)-1] {
			dm, sm = dm.Mutable(fd).Message(), sm.Get(fd).Message()
		}
		last := path[len(path)-1]
		dm.Set(last, protoreflect.ValueOfMessage(proto.Clone(sm.Get(last).Message().Interface()).ProtoReflect()))
	}
	return nil
}

// durationPaths are the paths (singular message fields) to every
// Duration set in m. Durations in lists and map values are not listed:
// proto.Merge copies those whole.
func durationPaths(m protoreflect.Message) [][]protoreflect.FieldDescriptor {
	var out [][]protoreflect.FieldDescriptor
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.IsList() || fd.IsMap() || fd.Message() == nil {
			return true
		}
		if fd.Message().FullName() == durationName {
			out = append(out, []protoreflect.FieldDescriptor{fd})
			return true
		}
		for _, sub := range durationPaths(v.Message()) {
			out = append(out, append([]protoreflect.FieldDescriptor{fd}, sub...))
		}
		return true
	})
	if out == nil {
		out = [][]protoreflect.FieldDescriptor{}
	}
	return out
}

var durationName = (&durationpb.Duration{}).ProtoReflect().Descriptor().FullName()

func mergeMessage(dst, src protoreflect.Message, replaceList bool) {
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			l := dst.Mutable(fd).List()
			if replaceList {
				l.Truncate(0)
			}
			sl := v.List()
			for i := 0; i < sl.Len(); i++ {
				if fd.Message() != nil {
					e := l.NewElement()
					mergeMessage(e.Message(), sl.Get(i).Message(), replaceList)
					l.Append(e)
				} else {
					l.Append(copyScalar(fd, sl.Get(i)))
				}
			}
		case fd.IsMap():
			m := dst.Mutable(fd).Map()
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				if fd.MapValue().Message() != nil {
					e := m.NewValue()
					mergeMessage(e.Message(), mv.Message(), replaceList)
					m.Set(k, e)
				} else {
					m.Set(k, copyScalar(fd.MapValue(), mv))
				}
				return true
			})
		case fd.Message() != nil && fd.Message().FullName() == durationName:
			dst.Set(fd, protoreflect.ValueOfMessage(proto.Clone(v.Message().Interface()).ProtoReflect()))
		case fd.Message() != nil:
			mergeMessage(dst.Mutable(fd).Message(), v.Message(), replaceList)
		default:
			dst.Set(fd, copyScalar(fd, v))
		}
		return true
	})
}

func copyScalar(fd protoreflect.FieldDescriptor, v protoreflect.Value) protoreflect.Value {
	if fd.Kind() == protoreflect.BytesKind {
		return protoreflect.ValueOfBytes(append([]byte{}, v.Bytes()...))
	}
	return v
}

// mergeAny merges the message packed in src into the one packed in dst
// (istiod's MergeAnyWithAny): both are unpacked, merged and packed again.
// Different types are an error.
func mergeAny(dst, src *anypb.Any) (*anypb.Any, error) {
	d, err := dst.UnmarshalNew()
	if err != nil {
		return nil, fmt.Errorf("unpacking %s: %w", dst.GetTypeUrl(), err)
	}
	s, err := src.UnmarshalNew()
	if err != nil {
		return nil, fmt.Errorf("unpacking %s: %w", src.GetTypeUrl(), err)
	}
	if err := mergeValue(networking.EnvoyFilter_Patch_MERGE, d, s); err != nil {
		return nil, err
	}
	return anypb.New(d)
}

// merge merges p's value into dst (mergeValue, with p's Durations known).
func (p *patch) merge(dst proto.Message) error {
	return mergeWith(p.op, dst, p.value, p.durations)
}

// insertAt returns s with e inserted at index i.
func insertAt[E any](s []E, i int, e E) []E {
	s = append(s, e)
	copy(s[i+1:], s[i:])
	s[i] = e
	return s
}

// indexOf is the index of the first element of s for which f holds, -1 if none.
func indexOf[E any](s []E, f func(E) bool) int {
	for i, e := range s {
		if f(e) {
			return i
		}
	}
	return -1
}

// clone is proto.Clone typed.
func clone[M proto.Message](m M) M { return proto.Clone(m).(M) }
