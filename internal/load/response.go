package load

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"unicode/utf8"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
)

// response is a DiscoveryResponse (or, with delta, a
// DeltaDiscoveryResponse) as the client reads it: the fields it uses,
// parsed with protowire from one copy of the message, without an
// anypb.Any per resource. decode reads the message and finds the
// resources; parse, called only by a proxy that has not seen the same
// resources applied to the same set (see interner.apply), reads inside
// them. The typed messages are decoded by the interner, once per
// distinct content.
//
// decode and parse together accept exactly the messages proto.Unmarshal
// accepts and read the same values (fuzzed against it in
// response_test.go): fields the client does not use are checked as the
// proto runtime checks them.
type response struct {
	delta   bool   // set by the caller: which message RecvMsg expects
	buf     []byte // the message; nil after release
	pooled  *[]byte
	version string // version_info, or system_version_info
	typeURL string
	nonce   string
	elems   []span // the resources, unparsed
	res     []rawResource
	removed []string // Delta removed_resources
	// digest identifies the resources and removals: responses with equal
	// digests have the same content.
	digest uint64
}

// rawResource is one resource of a response: for SotW an Any, for Delta
// a Resource holding one.
type rawResource struct {
	typeURL, value span // the Any
	name, version  span // Delta only
	hasAny         bool // Delta: a Resource without an Any is a TTL heartbeat
}

// span is a byte range of response.buf. Spans hold no pointers, so the
// resource list is reused across responses without pinning old buffers.
type span struct{ off, n uint32 }

func (r *response) bytes(s span) []byte { return r.buf[s.off : s.off+s.n] }

func (r *response) span(v []byte, at int) span { return span{uint32(at), uint32(len(v))} }

// size is the message's length on the wire.
func (r *response) size() int { return len(r.buf) }

// release gives the message buffer back once the response has been
// applied: nothing taken from it refers to it (strings are copies, the
// resources spans).
func (r *response) release() {
	r.buf = nil
	if r.pooled != nil {
		buffers.Put(r.pooled)
		r.pooled = nil
	}
}

var (
	sotwResponseDesc  = (&discovery.DiscoveryResponse{}).ProtoReflect().Descriptor()
	deltaResponseDesc = (&discovery.DeltaDiscoveryResponse{}).ProtoReflect().Descriptor()
	resourceDesc      = (&discovery.Resource{}).ProtoReflect().Descriptor()
	anyDesc           = (&anypb.Any{}).ProtoReflect().Descriptor()
)

// Field numbers of DiscoveryResponse, DeltaDiscoveryResponse, Resource
// and Any.
const (
	respVersion   = 1 // version_info, system_version_info
	respResources = 2
	respTypeURL   = 4
	respNonce     = 5
	respRemoved   = 6 // Delta removed_resources

	resVersion = 1
	resAny     = 2
	resName    = 3

	anyTypeURL = 1
	anyValue   = 2
)

// decode parses b, which the response keeps; b must not be altered
// afterwards.
func (r *response) decode(b []byte) error {
	*r = response{delta: r.delta, buf: b, elems: r.elems[:0], res: r.res[:0], removed: r.removed[:0]}
	md := sotwResponseDesc
	if r.delta {
		md = deltaResponseDesc
	}
	var d maphash.Hash
	d.SetSeed(seed)
	var h [8]byte
	fr := fieldReader{b: b, md: md}
	for !fr.done() {
		num, v, at, err := fr.next()
		if err != nil {
			return err
		}
		if v == nil {
			continue // not length-delimited: checked and skipped
		}
		switch num {
		case respVersion:
			r.version, err = str(v)
		case respTypeURL:
			r.typeURL, err = str(v)
		case respNonce:
			r.nonce, err = str(v)
		case respResources:
			r.elems = append(r.elems, r.span(v, at))
			binary.LittleEndian.PutUint64(h[:], maphash.Bytes(seed, v))
			d.Write(h[:])
		case respRemoved:
			if !r.delta {
				err = fr.skipped(num, v)
				break
			}
			var s string
			if s, err = str(v); err == nil {
				r.removed = append(r.removed, s)
			}
		default:
			err = fr.skipped(num, v)
		}
		if err != nil {
			return fmt.Errorf("%s: field %d: %w", md.Name(), num, err)
		}
	}
	// The removals follow a count of resources, so they cannot pass for
	// resources.
	binary.LittleEndian.PutUint64(h[:], uint64(len(r.elems)))
	d.Write(h[:])
	for _, s := range r.removed {
		binary.LittleEndian.PutUint64(h[:], uint64(len(s)))
		d.Write(h[:])
		d.WriteString(s)
	}
	r.digest = d.Sum64()
	return nil
}

// parse reads the resources decode found into res.
func (r *response) parse() error {
	r.res = r.res[:0]
	for i, e := range r.elems {
		var rr rawResource
		var err error
		if r.delta {
			err = r.parseResource(r.bytes(e), int(e.off), &rr)
		} else {
			err = r.parseAny(r.bytes(e), int(e.off), &rr)
		}
		if err != nil {
			md := sotwResponseDesc
			if r.delta {
				md = deltaResponseDesc
			}
			return fmt.Errorf("%s: field %d: resources[%d]: %w", md.Name(), respResources, i, err)
		}
		r.res = append(r.res, rr)
	}
	return nil
}

// parseAny reads an Any at offset at of buf into rr. Like the proto
// runtime it merges into what rr holds: a field seen again replaces it.
func (r *response) parseAny(b []byte, at int, rr *rawResource) error {
	fr := fieldReader{b: b, md: anyDesc, base: at}
	for !fr.done() {
		num, v, vat, err := fr.next()
		if err != nil {
			return err
		}
		if v == nil {
			continue
		}
		switch num {
		case anyTypeURL:
			if !utf8.Valid(v) {
				return fmt.Errorf("Any type_url: %w", errUTF8)
			}
			rr.typeURL = r.span(v, vat)
		case anyValue:
			rr.value = r.span(v, vat)
		}
		// Any has no other fields: the rest are unknown and were
		// checked by next.
	}
	return nil
}

// parseResource reads a Delta Resource at offset at of buf into rr.
func (r *response) parseResource(b []byte, at int, rr *rawResource) error {
	fr := fieldReader{b: b, md: resourceDesc, base: at}
	for !fr.done() {
		num, v, vat, err := fr.next()
		if err != nil {
			return err
		}
		if v == nil {
			continue
		}
		switch num {
		case resName, resVersion:
			if !utf8.Valid(v) {
				return fmt.Errorf("Resource field %d: %w", num, errUTF8)
			}
			if num == resName {
				rr.name = r.span(v, vat)
			} else {
				rr.version = r.span(v, vat)
			}
		case resAny:
			rr.hasAny = true
			if err := r.parseAny(v, vat, rr); err != nil {
				return fmt.Errorf("Resource resource: %w", err)
			}
		default:
			if err := fr.skipped(num, v); err != nil {
				return fmt.Errorf("Resource field %d: %w", num, err)
			}
		}
	}
	return nil
}

var errUTF8 = errors.New("invalid UTF-8")

func str(v []byte) (string, error) {
	if !utf8.Valid(v) {
		return "", errUTF8
	}
	return string(v), nil
}

// fieldReader walks the fields of one protobuf message.
type fieldReader struct {
	b    []byte
	off  int
	base int // offset of b in the response buffer
	md   protoreflect.MessageDescriptor
}

func (f *fieldReader) done() bool { return f.off >= len(f.b) }

// next returns the next field. A length-delimited field's payload comes
// back in v with its offset in the response buffer; any other field is
// checked and skipped, and v is nil.
func (f *fieldReader) next() (num protowire.Number, v []byte, at int, err error) {
	num, typ, n := protowire.ConsumeTag(f.b[f.off:])
	if n < 0 {
		return 0, nil, 0, fmt.Errorf("%s: tag at byte %d: %w", f.md.Name(), f.off, protowire.ParseError(n))
	}
	if num > protowire.MaxValidNumber {
		return 0, nil, 0, fmt.Errorf("%s: field number %d at byte %d out of range", f.md.Name(), num, f.off)
	}
	f.off += n
	if typ == protowire.EndGroupType {
		return 0, nil, 0, fmt.Errorf("%s: field %d: end group without a start", f.md.Name(), num)
	}
	if typ != protowire.BytesType {
		// Proto3 scalars (canary) take any value of their wire type; a
		// field of another wire type is kept as an unknown field.
		n = protowire.ConsumeFieldValue(num, typ, f.b[f.off:])
		if n < 0 {
			return 0, nil, 0, fmt.Errorf("%s: field %d: %w", f.md.Name(), num, protowire.ParseError(n))
		}
		f.off += n
		return num, nil, 0, nil
	}
	v, n = protowire.ConsumeBytes(f.b[f.off:])
	if n < 0 {
		return 0, nil, 0, fmt.Errorf("%s: field %d: %w", f.md.Name(), num, protowire.ParseError(n))
	}
	if v == nil {
		v = f.b[f.off:f.off] // present and empty, not absent
	}
	at = f.base + f.off + n - len(v)
	f.off += n
	return num, v, at, nil
}

// skipped checks a length-delimited field the client does not use as
// proto.Unmarshal would: a string must be UTF-8 and a message must
// parse. Unknown fields need no more than next checked.
func (f *fieldReader) skipped(num protowire.Number, v []byte) error {
	fd := f.md.Fields().ByNumber(num)
	if fd == nil {
		return nil
	}
	switch fd.Kind() {
	case protoreflect.StringKind:
		if !utf8.Valid(v) {
			return errUTF8
		}
	case protoreflect.BytesKind:
	case protoreflect.MessageKind:
		mt, err := protoregistry.GlobalTypes.FindMessageByName(fd.Message().FullName())
		if err != nil {
			return err
		}
		return proto.Unmarshal(v, mt.New().Interface())
	case protoreflect.GroupKind:
		// Groups are never length-delimited: an unknown field.
	default:
		if fd.IsList() {
			return checkPacked(fd.Kind(), v)
		}
		// A scalar in the wrong wire type: an unknown field.
	}
	return nil
}

// checkPacked checks a packed repeated scalar (these messages have none
// today).
func checkPacked(k protoreflect.Kind, v []byte) error {
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		if len(v)%4 != 0 {
			return errors.New("packed fixed32 values: truncated")
		}
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		if len(v)%8 != 0 {
			return errors.New("packed fixed64 values: truncated")
		}
	default:
		for len(v) > 0 {
			_, n := protowire.ConsumeVarint(v)
			if n < 0 {
				return fmt.Errorf("packed varints: %w", protowire.ParseError(n))
			}
			v = v[n:]
		}
	}
	return nil
}
