package xdsserver

import (
	"errors"
	"fmt"
	"hash/maphash"
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

// sotwRequest is a SotW DiscoveryRequest as the codec decodes it. Every
// ACK of an EDS response repeats the whole subscription, thousands of
// cluster names; the names stay in one copy of the message, summarised
// by their count, an order-independent hash and whether "*" is among
// them, and become strings only when names is called (the subscription
// changed). Strings point into the copy: whatever outlives the request
// is interned or cloned.
type sotwRequest struct {
	discovery.DiscoveryRequest // ResourceNames unset unless decoded by the proto runtime
	buf                        []byte
	pooled                     *[]byte // buf's buffer from requestPool
	nNames                     int
	namesSum                   uint64
	star                       bool
	parsed                     bool
	// list is the subscription as a shared list, once resolved.
	list *nameList
}

// resolver turns the names of a stream's requests into shared lists on
// the stream's receiving goroutine and gives the message's copy back:
// requests that wait for the connection's loop (busy sending megabytes
// during a connect storm) then hold no copy of thousands of names. A
// request repeating the previous request's names of its type gets the
// same list for the cost of the hash decodeRequest took.
type resolver struct {
	shared *lists
	last   map[string]resolvedList // by type URL
}

type resolvedList struct {
	sum  uint64
	n    int
	list *nameList
}

func (rs *resolver) resolve(r *sotwRequest) {
	defer r.release()
	if r.nNames == 0 || r.star {
		return // a wildcard
	}
	last, ok := rs.last[r.TypeUrl]
	if ok && last.sum == r.namesSum && last.n == r.nNames {
		r.list = last.list
		return
	}
	names := r.names()
	if !slices.IsSorted(names) {
		names = slices.Sorted(slices.Values(names))
	}
	r.list = rs.shared.get(r.namesSum, names) // copies the names it keeps
	if rs.last == nil {
		rs.last = map[string]resolvedList{}
	}
	rs.last[unique.Make(r.TypeUrl).Value()] = resolvedList{r.namesSum, r.nNames, r.list}
}

// release gives the message's copy back to the pool, first copying the
// strings that point into it.
func (r *sotwRequest) release() {
	if r.pooled == nil {
		return
	}
	r.VersionInfo, r.ResponseNonce = strings.Clone(r.VersionInfo), strings.Clone(r.ResponseNonce)
	r.TypeUrl = unique.Make(r.TypeUrl).Value()
	r.ResourceNames, r.parsed = nil, false
	requestPool.Put(r.pooled)
	r.buf, r.pooled = nil, nil
}

// names returns the resource names in the order the client sent them.
func (r *sotwRequest) names() []string {
	if r.parsed || r.nNames == 0 {
		return r.ResourceNames
	}
	r.parsed = true
	out := make([]string, 0, r.nNames)
	for b := r.buf; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		b = b[n:]
		n = protowire.ConsumeFieldValue(num, typ, b)
		if num == 3 {
			v, _ := protowire.ConsumeBytes(b)
			out = append(out, unsafe.String(unsafe.SliceData(v), len(v)))
		}
		b = b[n:]
	}
	r.ResourceNames = out
	return out
}

// summarise records the count, hash and wildcard of names decoded by the
// proto runtime.
func (r *sotwRequest) summarise() {
	r.nNames, r.namesSum, r.star, r.parsed = len(r.ResourceNames), namesHash(r.ResourceNames), false, true
	for _, n := range r.ResourceNames {
		r.star = r.star || n == "*"
	}
}

// decodeRequest decodes a SotW DiscoveryRequest with one allocation for
// its bytes; the names are checked for UTF-8 as the proto runtime would
// and hashed, not split out. Fields this decoder does not know go through
// the proto runtime.
func decodeRequest(data mem.BufferSlice, r *sotwRequest) error {
	pooled := requestPool.Get(data.Len())
	b := (*pooled)[:data.CopyTo(*pooled)]
	*r = sotwRequest{buf: b, pooled: pooled}
	str := func(v []byte) (string, error) {
		if !utf8.Valid(v) {
			return "", errors.New("string field contains invalid UTF-8")
		}
		return unsafe.String(unsafe.SliceData(v), len(v)), nil
	}
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
			if !utf8.Valid(v) {
				err = errors.New("string field contains invalid UTF-8")
				break
			}
			r.nNames++
			r.namesSum += maphash.Bytes(namesSeed, v)
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
	return nil
}

func fallbackDecode(data mem.BufferSlice, r *sotwRequest) error {
	if r.pooled != nil {
		requestPool.Put(r.pooled)
	}
	*r = sotwRequest{}
	if err := proto.Unmarshal(data.Materialize(), &r.DiscoveryRequest); err != nil {
		return err
	}
	r.summarise()
	return nil
}
