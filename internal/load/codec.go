package load

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the fallback codec
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
)

// codec is the proxies' gRPC codec. It reads responses into *response
// and writes *sotwRequest and *deltaRequest with protowire, so a proxy
// pays for a response with one copy and a walk over it, and for an ACK
// with a few small appends; other messages go to grpc's proto codec.
// Its name is "proto": on the wire nothing changes.
type codec struct{ fallback encoding.CodecV2 }

var clientCodec = codec{fallback: encoding.GetCodecV2("proto")}

// codecOption makes a stream use the client codec.
var codecOption = grpc.ForceCodecV2(clientCodec)

func (codec) Name() string { return "proto" }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *sotwRequest:
		return m.marshal()
	case *deltaRequest:
		return m.marshal()
	}
	return c.fallback.Marshal(v)
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(*response)
	if !ok {
		return c.fallback.Unmarshal(data, v)
	}
	// grpc reuses data once Unmarshal returns: copy it once and point
	// into the copy, which goes back to the pool when the response is
	// released.
	b := buffers.Get(data.Len())
	data.CopyTo(*b)
	if err := m.decode(*b); err != nil {
		buffers.Put(b)
		return fmt.Errorf("load codec: %w", err)
	}
	m.pooled = b
	return nil
}

// bufferPoolOption gives the proxies' connections the pool: grpc's
// default pool clears every buffer it hands out and jumps from 32 KB to
// 1 MB.
var bufferPoolOption = experimental.WithBufferPool(buffers)
