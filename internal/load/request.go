package load

import (
	"fmt"
	"slices"
	"sync"

	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// sotwRequest is a DiscoveryRequest as the client sends it.
type sotwRequest struct {
	node    []byte // the encoded Node, on a stream's first request
	version string
	names   *nameList
	typeURL string
	nonce   string
	err     error // a NACK's error_detail message
}

// deltaRequest is a DeltaDiscoveryRequest as the client sends it.
type deltaRequest struct {
	node                   []byte
	typeURL                string
	subscribe, unsubscribe *nameList
	initial                map[string]string // initial_resource_versions
	nonce                  string
	err                    error
}

// Field numbers of DiscoveryRequest and DeltaDiscoveryRequest.
const (
	reqVersion = 1
	reqNode    = 2
	reqNames   = 3
	reqTypeURL = 4
	reqNonce   = 5
	reqError   = 6

	dreqNode        = 1
	dreqTypeURL     = 2
	dreqSubscribe   = 3
	dreqUnsubscribe = 4
	dreqInitial     = 5
	dreqNonce       = 6
	dreqError       = 7
)

// marshal encodes r. The name list, the bulk of an ACK, is its shared
// encoding: an ACK costs a few small appends.
func (r *sotwRequest) marshal() (mem.BufferSlice, error) {
	b := make([]byte, 0, 16+len(r.node)+len(r.version)+len(r.typeURL)+len(r.nonce))
	b = appendString(b, reqVersion, r.version)
	if r.node != nil {
		b = protowire.AppendTag(b, reqNode, protowire.BytesType)
		b = protowire.AppendBytes(b, r.node)
	}
	b = appendString(b, reqTypeURL, r.typeURL)
	b = appendString(b, reqNonce, r.nonce)
	b, err := appendError(b, reqError, r.err)
	if err != nil {
		return nil, err
	}
	out := mem.BufferSlice{mem.SliceBuffer(b)}
	if enc := r.names.encoded(); len(enc) > 0 {
		// Fields may come in any order; this buffer is shared and
		// never written.
		out = append(out, mem.SliceBuffer(enc))
	}
	return out, nil
}

// marshal encodes r.
func (r *deltaRequest) marshal() (mem.BufferSlice, error) {
	b := make([]byte, 0, 16+len(r.node)+len(r.typeURL)+len(r.nonce))
	if r.node != nil {
		b = protowire.AppendTag(b, dreqNode, protowire.BytesType)
		b = protowire.AppendBytes(b, r.node)
	}
	b = appendString(b, dreqTypeURL, r.typeURL)
	b = appendStrings(b, dreqUnsubscribe, r.unsubscribe.list())
	for k, v := range r.initial {
		e := appendString(appendString(nil, 1, k), 2, v)
		b = protowire.AppendTag(b, dreqInitial, protowire.BytesType)
		b = protowire.AppendBytes(b, e)
	}
	b = appendString(b, dreqNonce, r.nonce)
	b, err := appendError(b, dreqError, r.err)
	if err != nil {
		return nil, err
	}
	out := mem.BufferSlice{mem.SliceBuffer(b)}
	// resource_names_subscribe has the field number of a DiscoveryRequest's
	// resource_names, so a shared list's encoding serves both.
	if enc := r.subscribe.encoded(); len(enc) > 0 {
		out = append(out, mem.SliceBuffer(enc))
	}
	return out, nil
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b // proto3: the default is not sent
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendStrings(b []byte, num protowire.Number, ss []string) []byte {
	for _, s := range ss {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendString(b, s)
	}
	return b
}

// appendError appends a NACK's error_detail: InvalidArgument with err's
// message.
func appendError(b []byte, num protowire.Number, err error) ([]byte, error) {
	if err == nil {
		return b, nil
	}
	st, merr := proto.Marshal(&statuspb.Status{Code: int32(codes.InvalidArgument), Message: err.Error()})
	if merr != nil {
		return nil, fmt.Errorf("error_detail: %w", merr)
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, st), nil
}

// nameList is a sorted list of resource names, typically a Set's Deps
// that thousands of proxies subscribe to, with its encoding as
// resource_names computed once. It must not be altered. A nil *nameList
// is the empty list.
type nameList struct {
	names []string
	once  sync.Once
	enc   []byte
}

func newNameList(names []string) *nameList {
	if len(names) == 0 {
		return nil
	}
	return &nameList{names: names}
}

// wildcardNames subscribes to every resource of a type.
var wildcardNames = newNameList([]string{"*"})

func (l *nameList) list() []string {
	if l == nil {
		return nil
	}
	return l.names
}

func (l *nameList) len() int { return len(l.list()) }

// equal reports whether l and o hold the same names.
func (l *nameList) equal(o *nameList) bool {
	return l == o || slices.Equal(l.list(), o.list())
}

// encoded is the names as repeated field 3 (DiscoveryRequest
// resource_names, DeltaDiscoveryRequest resource_names_subscribe).
func (l *nameList) encoded() []byte {
	if l == nil {
		return nil
	}
	l.once.Do(func() {
		n := 0
		for _, s := range l.names {
			n += protowire.SizeTag(reqNames) + protowire.SizeBytes(len(s))
		}
		l.enc = appendStrings(make([]byte, 0, n), reqNames, l.names)
	})
	return l.enc
}
