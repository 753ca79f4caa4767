package xdsserver

import (
	"errors"
	"fmt"
	"unicode/utf8"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// decodeRequest decodes a SotW DiscoveryRequest with one allocation for
// all its resource names: they point into one copy of the message. Every
// ACK of an EDS response repeats thousands of cluster names; decoding each
// into its own string was the largest allocation of a connect storm. The
// names are checked for UTF-8 as the proto runtime would. Fields this
// decoder does not know go through the proto runtime.
func decodeRequest(data mem.BufferSlice, r *discovery.DiscoveryRequest) error {
	b := data.Materialize()
	str := func(v []byte) (string, error) {
		if !utf8.Valid(v) {
			return "", errors.New("string field contains invalid UTF-8")
		}
		return unsafe.String(unsafe.SliceData(v), len(v)), nil
	}
	r.Reset()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType {
			return fallbackDecode(data, r)
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
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
			var s string
			if s, err = str(v); err == nil {
				r.ResourceNames = append(r.ResourceNames, s)
			}
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
	return nil
}

func fallbackDecode(data mem.BufferSlice, r *discovery.DiscoveryRequest) error {
	r.Reset()
	return proto.Unmarshal(data.Materialize(), r)
}
