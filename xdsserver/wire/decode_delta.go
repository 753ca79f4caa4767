package wire

import (
	"errors"
	"fmt"
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

// decodeDeltaRequest decodes a DeltaDiscoveryRequest. A first request
// subscribes to thousands of names; each is interned straight from the
// message's bytes (unique.Make copies only a name it has not seen), so a
// connect storm allocates no string per name per proxy. Fields this
// decoder does not know (initial_resource_versions, resource locators)
// go through the proto runtime.
func decodeDeltaRequest(data mem.BufferSlice, r *discovery.DeltaDiscoveryRequest) error {
	pooled := requestPool.Get(data.Len())
	defer requestPool.Put(pooled)
	b := (*pooled)[:data.CopyTo(*pooled)]
	r.Reset()
	// First pass: check the framing, count the names, spot unknown fields.
	var nSub, nUnsub int
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return protowire.ParseError(n)
		}
		off += n
		if typ != protowire.BytesType {
			return fallbackDecodeDelta(data, r)
		}
		_, n = protowire.ConsumeBytes(b[off:])
		if n < 0 {
			return protowire.ParseError(n)
		}
		off += n
		switch num {
		case 1, 2, 6, 7:
		case 3:
			nSub++
		case 4:
			nUnsub++
		default:
			return fallbackDecodeDelta(data, r)
		}
	}
	if nSub > 0 {
		r.ResourceNamesSubscribe = make([]string, 0, nSub)
	}
	if nUnsub > 0 {
		r.ResourceNamesUnsubscribe = make([]string, 0, nUnsub)
	}
	for off := 0; off < len(b); {
		num, _, n := protowire.ConsumeTag(b[off:])
		off += n
		v, n := protowire.ConsumeBytes(b[off:])
		off += n
		var err error
		switch num {
		case 1: // a repeated message field merges, as proto does
			if r.Node == nil {
				r.Node = &corev3.Node{}
			}
			err = proto.UnmarshalOptions{Merge: true}.Unmarshal(v, r.Node)
		case 2:
			if err = validUTF8(v); err == nil {
				r.TypeUrl = unique.Make(unsafe.String(unsafe.SliceData(v), len(v))).Value()
			}
		case 3:
			if err = validUTF8(v); err == nil {
				r.ResourceNamesSubscribe = append(r.ResourceNamesSubscribe, unique.Make(unsafe.String(unsafe.SliceData(v), len(v))).Value())
			}
		case 4:
			if err = validUTF8(v); err == nil {
				r.ResourceNamesUnsubscribe = append(r.ResourceNamesUnsubscribe, unique.Make(unsafe.String(unsafe.SliceData(v), len(v))).Value())
			}
		case 6:
			if err = validUTF8(v); err == nil {
				r.ResponseNonce = strings.Clone(unsafe.String(unsafe.SliceData(v), len(v)))
			}
		case 7:
			if r.ErrorDetail == nil {
				r.ErrorDetail = &statuspb.Status{}
			}
			err = proto.UnmarshalOptions{Merge: true}.Unmarshal(v, r.ErrorDetail)
		}
		if err != nil {
			return fmt.Errorf("DeltaDiscoveryRequest field %d: %w", num, err)
		}
	}
	return nil
}

func validUTF8(v []byte) error {
	if !utf8.Valid(v) {
		return errors.New("string field contains invalid UTF-8")
	}
	return nil
}

func fallbackDecodeDelta(data mem.BufferSlice, r *discovery.DeltaDiscoveryRequest) error {
	r.Reset()
	return proto.Unmarshal(data.Materialize(), r)
}
