package wire

import (
	"fmt"
	"hash/maphash"
	"iter"
	"slices"
	"strings"
	"unicode/utf8"
	"unique"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Request is a SotW DiscoveryRequest as the codec decodes it. Every
// ACK of an EDS response repeats the whole subscription, thousands of
// cluster names. The codec leaves them in one copy of the message,
// summarised by their count, one hash of their bytes as sent and whether
// "*" is among them; the stream's Resolver then makes them a shared list
// and gives the copy back. Until then, strings point into the copy.
type Request struct {
	discovery.DiscoveryRequest // ResourceNames unset unless decoded by the proto runtime
	buf                        []byte
	pooled                     *[]byte // buf's buffer from requestPool
	nNames                     int
	wireSum                    uint64 // of the names' bytes in the order sent
	star                       bool
	// list is the subscription as a shared list, once resolved (nil for
	// a wildcard).
	List *NameList
}

// decodeRequest decodes a SotW DiscoveryRequest into a copy of its bytes
// from requestPool. The names are hashed as one span of bytes, not
// split out or checked: the Resolver checks them (UTF-8, as the proto
// runtime would) when they differ from the stream's previous request.
// Fields this decoder does not know go through the proto runtime.
func decodeRequest(data mem.BufferSlice, r *Request) error {
	pooled := requestPool.Get(data.Len())
	b := (*pooled)[:data.CopyTo(*pooled)]
	*r = Request{buf: b, pooled: pooled}
	str := func(v []byte) (string, error) {
		return unsafe.String(unsafe.SliceData(v), len(v)), validUTF8(v)
	}
	namesFrom, namesTo := -1, -1
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return protowire.ParseError(n)
		}
		start := off
		off += n
		if typ != protowire.BytesType {
			return fallbackDecode(data, r)
		}
		v, n := protowire.ConsumeBytes(b[off:])
		if n < 0 {
			return protowire.ParseError(n)
		}
		off += n
		var err error
		switch num {
		case 1:
			r.VersionInfo, err = str(v)
		case 2: // a repeated message field merges, as proto does
			if r.Node == nil {
				r.Node = &corev3.Node{}
			}
			err = proto.UnmarshalOptions{Merge: true}.Unmarshal(v, r.Node)
		case 3:
			if namesFrom < 0 {
				namesFrom = start
			}
			namesTo = off
			r.nNames++
			r.star = r.star || (len(v) == 1 && v[0] == '*')
		case 4:
			r.TypeUrl, err = str(v)
		case 5:
			r.ResponseNonce, err = str(v)
		case 6:
			if r.ErrorDetail == nil {
				r.ErrorDetail = &statuspb.Status{}
			}
			err = proto.UnmarshalOptions{Merge: true}.Unmarshal(v, r.ErrorDetail)
		default:
			return fallbackDecode(data, r)
		}
		if err != nil {
			return fmt.Errorf("DiscoveryRequest field %d: %w", num, err)
		}
	}
	if namesFrom >= 0 {
		r.wireSum = maphash.Bytes(namesSeed, b[namesFrom:namesTo])
	}
	return nil
}

func fallbackDecode(data mem.BufferSlice, r *Request) error {
	if r.pooled != nil {
		requestPool.Put(r.pooled)
	}
	*r = Request{}
	if err := proto.Unmarshal(data.Materialize(), &r.DiscoveryRequest); err != nil {
		return err
	}
	r.Summarise()
	return nil
}

// Summarise takes the summary of names decoded by the proto runtime (or
// another codec).
func (r *Request) Summarise() {
	r.nNames, r.wireSum, r.star = len(r.ResourceNames), NamesHash(r.ResourceNames), slices.Contains(r.ResourceNames, "*")
}

// names returns the resource names in the order the client sent them,
// checked for UTF-8.
func (r *Request) names() ([]string, error) {
	if r.buf == nil {
		return r.ResourceNames, nil
	}
	out := make([]string, 0, r.nNames)
	for v := range r.rawNames() {
		if !utf8.Valid(v) {
			return nil, fmt.Errorf("DiscoveryRequest field 3 (resource_names) %q: string field contains invalid UTF-8", v)
		}
		out = append(out, unsafe.String(unsafe.SliceData(v), len(v)))
	}
	return out, nil
}

// namesAre reports whether the request's names are names, in order,
// without making strings of them.
func (r *Request) namesAre(names []string) bool {
	if r.nNames != len(names) {
		return false
	}
	if r.buf == nil {
		return slices.Equal(r.ResourceNames, names)
	}
	i := 0
	for v := range r.rawNames() {
		if string(v) != names[i] {
			return false
		}
		i++
	}
	return true
}

// rawNames yields the bytes of each resource name in r.buf (already
// checked by decodeRequest's framing pass).
func (r *Request) rawNames() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for b := r.buf; len(b) > 0; {
			num, _, n := protowire.ConsumeTag(b)
			b = b[n:]
			v, n := protowire.ConsumeBytes(b)
			b = b[n:]
			if num == 3 && !yield(v) {
				return
			}
		}
	}
}

// Resolver turns the names of a stream's requests into shared lists on
// the stream's receiving goroutine and gives each message's copy back:
// requests that wait for the connection's loop (busy sending megabytes
// during a connect storm) then hold no copy of thousands of names. A
// request repeating the names of the stream's previous request of its
// type gets the same list for the cost of one hash.
type Resolver struct {
	Shared *Lists
	last   map[string]resolvedList // by type URL
}

type resolvedList struct {
	sum  uint64
	n    int
	list *NameList
}

func (rs *Resolver) Resolve(r *Request) error {
	if r.buf == nil {
		r.Summarise() // decoded by the proto runtime or another codec
	}
	defer r.release()
	if r.star && r.nNames > 1 {
		if _, err := r.names(); err != nil {
			return err
		}
	}
	if r.nNames == 0 || r.star {
		return nil // a wildcard
	}
	last, ok := rs.last[r.TypeUrl]
	if ok && last.sum == r.wireSum && last.n == r.nNames {
		r.List = last.list
		return nil
	}
	if l := rs.Shared.byWire(r.wireSum); l != nil && r.namesAre(l.Names) {
		r.List = l // another stream sent the same names
	} else {
		names, err := r.names()
		if err != nil {
			return err
		}
		if !slices.IsSorted(names) {
			names = slices.Sorted(slices.Values(names))
		}
		r.List = rs.Shared.Get(NamesHash(names), names) // copies the names it keeps
		rs.Shared.setWire(r.wireSum, r.List)
	}
	if rs.last == nil {
		rs.last = map[string]resolvedList{}
	}
	rs.last[unique.Make(r.TypeUrl).Value()] = resolvedList{r.wireSum, r.nNames, r.List}
	return nil
}

// release gives the message's copy back to the pool, first copying the
// strings that point into it.
func (r *Request) release() {
	if r.pooled == nil {
		return
	}
	r.VersionInfo, r.ResponseNonce = strings.Clone(r.VersionInfo), strings.Clone(r.ResponseNonce)
	r.TypeUrl = unique.Make(r.TypeUrl).Value()
	requestPool.Put(r.pooled)
	r.buf, r.pooled = nil, nil
}
