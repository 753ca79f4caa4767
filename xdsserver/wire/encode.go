// Package wire owns the bytes of xDS: resources encoded once and shared
// (Resource, Interner), subscription name lists and held lists shared by
// content between connections, the request decoders that read names
// without copying them per proxy, the response framing, and the gRPC codec
// and server options that send pre-encoded parts.
//
// Of ours it imports only xdsserver/gen (the Resource a generator
// returns): never the protocol (ads), the generation stage (build) or the
// type table (xdstype).
package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unique"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/baremesh/baremesh/xdsserver/gen"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
)

// Resource is one generated resource, encoded once, as an Any framed as
// field 2 of a DiscoveryResponse (which is also field 2 of a Delta
// Resource). It is shared by every connection that holds it and never
// altered.
type Resource struct {
	Name   string
	Sum    [32]byte // of type URL and bytes
	framed []byte   // tag, length, Any bytes
	off    int      // where the Any bytes start in framed
	// buf is framed, boxed once for gRPC's codec.
	buf mem.Buffer
	// delta is the whole Delta Resource message, framed as field 2 of a
	// DeltaDiscoveryResponse; made on first use.
	deltaOnce sync.Once
	delta     mem.Buffer
}

// deltaBuf returns the resource framed for Delta: tag, length, then
// Resource{version 1, resource 2, name 3}.
func (e *Resource) deltaBuf() mem.Buffer {
	e.deltaOnce.Do(func() {
		ver, name := stringField(1, e.Version()), stringField(3, e.Name)
		n := len(ver) + len(e.framed) + len(name)
		b := protowire.AppendTag(make([]byte, 0, n+8), 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(n))
		b = append(append(append(b, ver...), e.framed...), name...)
		e.delta = mem.SliceBuffer(b)
	})
	return e.delta
}

func (e *Resource) anyBytes() []byte { return e.framed[e.off:] }

// Version is the resource's Delta version.
func (e *Resource) Version() string { return hex.EncodeToString(e.Sum[:8]) }

// Any decodes the resource (for config_dump).
func (e *Resource) Any() (*anypb.Any, error) {
	a := &anypb.Any{}
	return a, proto.Unmarshal(e.anyBytes(), a)
}

// Find returns the resource of held (sorted by name) named name, or nil.
func Find(held []*Resource, name string) *Resource {
	i, ok := slices.BinarySearchFunc(held, name, func(e *Resource, n string) int { return strings.Compare(e.Name, n) })
	if !ok {
		return nil
	}
	return held[i]
}

// Encode encodes what a generator returned: each resource is marshalled
// once, deterministically, straight into its framed Any, and shared
// through in. The result is sorted by name (what the Delta and the
// incremental SotW bookkeeping walk), once per generation rather than per
// proxy.
func Encode(typeURL string, res []gen.Resource, in *Interner) ([]*Resource, error) {
	out := make([]*Resource, 0, len(res))
	for _, r := range res {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r.Resource)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Name, err)
		}
		url := "type.googleapis.com/" + string(r.Resource.ProtoReflect().Descriptor().FullName())
		anyLen := protowire.SizeTag(1) + protowire.SizeBytes(len(url)) + protowire.SizeTag(2) + protowire.SizeBytes(len(b))
		f := make([]byte, 0, protowire.SizeTag(2)+protowire.SizeBytes(anyLen))
		f = protowire.AppendTag(f, 2, protowire.BytesType)
		f = protowire.AppendVarint(f, uint64(anyLen))
		off := len(f)
		f = protowire.AppendTag(f, 1, protowire.BytesType)
		f = protowire.AppendString(f, url)
		f = protowire.AppendTag(f, 2, protowire.BytesType)
		f = protowire.AppendBytes(f, b)
		h := sha256.New()
		h.Write([]byte(typeURL))
		h.Write(f[off:])
		// Names are interned, as subscription lists are: equal names are
		// then one string, and comparing them costs a pointer compare.
		e := &Resource{Name: unique.Make(r.Name).Value(), framed: f, off: off, buf: mem.SliceBuffer(f)}
		copy(e.Sum[:], h.Sum(nil))
		out = append(out, in.Intern(e))
	}
	if !slices.IsSortedFunc(out, ByName) {
		slices.SortFunc(out, ByName)
	}
	return out, nil
}

// ByName orders resources by name.
func ByName(a, b *Resource) int { return strings.Compare(a.Name, b.Name) }

// Same reports whether a and b are the same resources, in order.
func Same(a, b []*Resource) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Sum != b[i].Sum {
			return false
		}
	}
	return true
}

// Joined frames res as one buffer: a whole set then goes out as one part
// that gRPC writes without copying it into frame-sized pieces.
func Joined(res []*Resource) mem.Buffer {
	return joinFramed(res, func(e *Resource) []byte { return e.framed })
}

// JoinedDelta is res framed as a DeltaDiscoveryResponse's resources, in
// one buffer.
func JoinedDelta(res []*Resource) mem.Buffer {
	return joinFramed(res, func(e *Resource) []byte { return e.deltaBuf().ReadOnlyData() })
}

// Msg is a response already encoded as parts; the codec sends the parts
// as they are, so resources shared by thousands of proxies are never
// copied per proxy.
type Msg struct {
	parts mem.BufferSlice
	size  int // cached: once sent, the parts may have been freed
}

// Size is the message's length in bytes.
func (m *Msg) Size() int {
	if m.size == 0 {
		m.size = m.parts.Len()
	}
	return m.size
}

// codec passes Msg through and leaves everything else to gRPC's proto
// codec.
type codec struct{ proto encoding.CodecV2 }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*Msg); ok {
		// The last part stays a part of its own: it may be Written's
		// signal, which copying into a chunk would lose.
		n := len(m.parts)
		if n <= 64 {
			return m.parts, nil
		}
		return append(coalesce(m.parts[:n-1]), m.parts[n-1]), nil
	}
	return c.proto.Marshal(v)
}

// chunkSize is what small parts are copied together into: an HTTP/2
// frame's worth.
const chunkSize = 16 << 10

// coalesce copies runs of small parts into pooled chunks. A response of
// thousands of small resources that is not a whole shared list (those go
// joined, heldlists.go) would otherwise reach gRPC's writer as thousands
// of slices, and its writer allocates for a frame of more than 64; large
// parts go as they are. gRPC frees the chunks back to the pool once
// written.
func coalesce(parts mem.BufferSlice) mem.BufferSlice {
	if len(parts) <= 64 {
		return parts // gRPC's writer handles up to 64 slices a frame without allocating
	}
	pool := mem.DefaultBufferPool()
	out := make(mem.BufferSlice, 0, 8)
	var cur *[]byte
	flush := func() {
		if cur != nil {
			out = append(out, mem.NewBuffer(cur, pool))
			cur = nil
		}
	}
	for _, p := range parts {
		b := p.ReadOnlyData()
		if len(b) >= chunkSize/2 {
			flush()
			out = append(out, p)
			continue
		}
		if cur != nil && len(*cur)+len(b) > cap(*cur) {
			flush()
		}
		if cur == nil {
			cur = pool.Get(chunkSize)
			*cur = (*cur)[:0]
		}
		*cur = append(*cur, b...)
	}
	flush()
	return out
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*Request); ok {
		return decodeRequest(data, r)
	}
	if r, ok := v.(*DeltaRequest); ok {
		return decodeSharedDelta(data, r)
	}
	if r, ok := v.(*discovery.DeltaDiscoveryRequest); ok {
		return decodeDeltaRequest(data, r)
	}
	return c.proto.Unmarshal(data, v)
}
func (c codec) Name() string { return "proto" }

// GRPCServerOptions are the options a gRPC server serving this Server
// must have: the codec that sends pre-encoded responses and decodes
// requests lazily, and a buffer pool for reading requests.
func GRPCServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(codec{proto: encoding.GetCodecV2("proto")}),
		experimental.BufferPool(requestPool),
		grpc.WriteBufferSize(writeBufferSize),
		// Fixed receive windows (requests are small; a larger one comes
		// in pieces as the server reads it) turn off gRPC's bandwidth
		// estimation, which pings a connection after each burst of
		// requests it reads: with a connection per proxy, every ACK of a
		// push made the server write a ping and read the answer. 2,000
		// proxies on their own connections peaked at 311-395 MB RSS with
		// it and 231-262 MB without (issue #30; BenchmarkScale,
		// BAREMESH_SCALE_STREAMS_PER_CONN=1).
		grpc.InitialWindowSize(receiveWindow),
		grpc.InitialConnWindowSize(receiveWindow),
		// (gRPC shares the write buffer by default since SharedWriteBuffer
		// was deprecated: a connection takes one from a pool for a write
		// and gives it back after the flush.)
	}
}

// writeBufferSize is gRPC's own default, 32 KB. A connection holds its
// buffer for as long as a push's frames are being written to it, and the
// pool keeps what a burst took, so a full push to proxies with a
// connection each held one per proxy: with 256 KB (chosen for fewer
// write calls) 2,000 proxies on their own connections peaked at 452-467
// MB RSS, with 32 KB and the written send 286-317 MB, and a replica
// holding 2,000 proxies with config changing every second had three
// quarters of its heap in these buffers (issues #30 and #32;
// BenchmarkScale with BAREMESH_SCALE_STREAMS_PER_CONN=1). The extra
// write calls (the TLS port batches each write's records into one) were
// within the runs' noise in server CPU per proxy.
const writeBufferSize = 32 << 10

// receiveWindow is the flow-control window of what proxies send.
const receiveWindow = 1 << 20

// requestPool has a tier for every power of two up to 1 MB. gRPC's
// default pool jumps from 32 KB to 1 MB and clears a whole buffer on
// every Get, so each ACK naming a few thousand clusters (~80 KB) cleared
// a megabyte.
var requestPool = func() mem.BufferPool {
	p, err := mem.NewBinaryTieredBufferPool(8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20)
	if err != nil {
		panic(err)
	}
	return p
}()

func stringField(num protowire.Number, s string) []byte {
	b := protowire.AppendTag(make([]byte, 0, len(s)+6), num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func stringBuf(num protowire.Number, s string) mem.Buffer {
	return mem.SliceBuffer(stringField(num, s))
}

// partsCap is the number of parts of a response: the resources (one
// part when joined), version, type and nonce.
func partsCap(res []*Resource, joined mem.BufferSlice) int {
	if joined != nil {
		return len(joined) + 3
	}
	return len(res) + 3
}

// SotWMsg frames a DiscoveryResponse: version_info 1, resources 2,
// type_url 4, nonce 5.
// joined, if not nil, is res framed in a few buffers.
func SotWMsg(version, typeURL, nonce string, res []*Resource, joined mem.BufferSlice) *Msg {
	parts := make(mem.BufferSlice, 0, partsCap(res, joined))
	parts = append(parts, stringBuf(1, version))
	if joined != nil {
		parts = append(parts, joined...)
	} else {
		for _, e := range res {
			parts = append(parts, e.buf)
		}
	}
	parts = append(parts, stringBuf(4, typeURL), stringBuf(5, nonce))
	return &Msg{parts: parts}
}

// DeltaMsg frames a DeltaDiscoveryResponse: system_version_info 1,
// resources 2 (Resource: version 1, resource 2, name 3), type_url 4,
// nonce 5, removed_resources 6.
// joined, if not nil, is res framed as one buffer.
func DeltaMsg(version, typeURL, nonce string, res []*Resource, joined mem.BufferSlice, removed []string) *Msg {
	parts := make(mem.BufferSlice, 0, partsCap(res, joined)+1)
	parts = append(parts, stringBuf(1, version))
	if joined != nil {
		parts = append(parts, joined...)
	} else {
		for _, e := range res {
			parts = append(parts, e.deltaBuf())
		}
	}
	parts = append(parts, stringBuf(4, typeURL), stringBuf(5, nonce))
	if len(removed) > 0 {
		var b []byte
		for _, r := range removed {
			b = append(b, stringField(6, r)...)
		}
		parts = append(parts, mem.SliceBuffer(b))
	}
	return &Msg{parts: parts}
}
