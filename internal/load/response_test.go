package load

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// checkDecode decodes b with response.decode and with proto.Unmarshal:
// both must accept it or both refuse it, and read the same values.
func checkDecode(t *testing.T, b []byte, delta bool) (*response, error) {
	t.Helper()
	r := &response{delta: delta}
	err := r.decode(bytes.Clone(b))
	if err == nil {
		err = r.parse()
	}
	var want proto.Message = &discovery.DiscoveryResponse{}
	if delta {
		want = &discovery.DeltaDiscoveryResponse{}
	}
	werr := proto.Unmarshal(b, want)
	if (err == nil) != (werr == nil) {
		t.Fatalf("delta=%v %x: decode error %v, proto.Unmarshal error %v", delta, b, err, werr)
	}
	if err != nil {
		return nil, err
	}
	type any struct {
		typeURL string
		value   []byte
	}
	same := func(what string, got, want any) {
		t.Helper()
		if got.typeURL != want.typeURL || !bytes.Equal(got.value, want.value) {
			t.Fatalf("%x: %s: got %q %x, want %q %x", b, what, got.typeURL, got.value, want.typeURL, want.value)
		}
	}
	gotAny := func(rr rawResource) any { return any{string(r.bytes(rr.typeURL)), r.bytes(rr.value)} }
	if !delta {
		w := want.(*discovery.DiscoveryResponse)
		if r.version != w.GetVersionInfo() || r.typeURL != w.GetTypeUrl() || r.nonce != w.GetNonce() || len(r.res) != len(w.GetResources()) || len(r.removed) != 0 {
			t.Fatalf("%x: got %q %q %q %d resources, want %v", b, r.version, r.typeURL, r.nonce, len(r.res), w)
		}
		for i, a := range w.GetResources() {
			same("resource", gotAny(r.res[i]), any{a.GetTypeUrl(), a.GetValue()})
		}
		return r, nil
	}
	w := want.(*discovery.DeltaDiscoveryResponse)
	if r.version != w.GetSystemVersionInfo() || r.typeURL != w.GetTypeUrl() || r.nonce != w.GetNonce() || len(r.res) != len(w.GetResources()) || !slices.Equal(r.removed, w.GetRemovedResources()) && len(r.removed)+len(w.GetRemovedResources()) > 0 {
		t.Fatalf("%x: got %q %q %q %d resources removed %q, want %v", b, r.version, r.typeURL, r.nonce, len(r.res), r.removed, w)
	}
	for i, wr := range w.GetResources() {
		rr := r.res[i]
		if string(r.bytes(rr.name)) != wr.GetName() || string(r.bytes(rr.version)) != wr.GetVersion() || rr.hasAny != (wr.GetResource() != nil) {
			t.Fatalf("%x: resource %d: got %q %q any=%v, want %v", b, i, r.bytes(rr.name), r.bytes(rr.version), rr.hasAny, wr)
		}
		same("resource", gotAny(rr), any{wr.GetResource().GetTypeUrl(), wr.GetResource().GetValue()})
	}
	return r, nil
}

func marshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tag and field build hand-made wire input.
func tag(num protowire.Number, typ protowire.Type) []byte { return protowire.AppendTag(nil, num, typ) }

func field(num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(tag(num, protowire.BytesType), v)
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

func sampleSotW(t testing.TB) []byte {
	return marshal(t, &discovery.DiscoveryResponse{
		VersionInfo: "v1", TypeUrl: Cluster.URL(), Nonce: "n1", Canary: true,
		Resources: []*anypb.Any{
			{TypeUrl: Cluster.URL(), Value: []byte{0x0a, 0x01, 'a'}},
			{TypeUrl: Cluster.URL()},
			{},
		},
		ControlPlane: &corev3.ControlPlane{Identifier: "cp"},
	})
}

func sampleDelta(t testing.TB) []byte {
	return marshal(t, &discovery.DeltaDiscoveryResponse{
		SystemVersionInfo: "s1", TypeUrl: Endpoint.URL(), Nonce: "n2",
		Resources: []*discovery.Resource{
			{Name: "a", Version: "1", Resource: &anypb.Any{TypeUrl: Endpoint.URL(), Value: []byte{0x0a, 0x01, 'a'}}},
			{Name: "ttl", Ttl: durationpb.New(5)},
			{Name: "empty", Resource: &anypb.Any{}, Aliases: []string{"x"}},
		},
		RemovedResources: []string{"gone", ""},
	})
}

func TestDecodeResponse(t *testing.T) {
	sotw, delta := sampleSotW(t), sampleDelta(t)
	cases := []struct {
		name  string
		in    []byte
		delta bool
		err   string // in the error; "" for none
		check func(t *testing.T, r *response)
	}{
		{name: "empty", in: nil, check: func(t *testing.T, r *response) {
			if r.version != "" || len(r.res) != 0 {
				t.Errorf("%+v", r)
			}
		}},
		{name: "empty delta", in: nil, delta: true},
		{name: "sotw", in: sotw, check: func(t *testing.T, r *response) {
			if r.nonce != "n1" || len(r.res) != 3 || string(r.bytes(r.res[0].value)) != "\x0a\x01a" {
				t.Errorf("%+v", r)
			}
		}},
		{name: "delta", in: delta, delta: true, check: func(t *testing.T, r *response) {
			if len(r.res) != 3 || r.res[1].hasAny || !r.res[2].hasAny || len(r.removed) != 2 {
				t.Errorf("%+v", r)
			}
		}},
		{name: "unknown fields of every wire type", in: cat(sotw,
			protowire.AppendVarint(tag(99, protowire.VarintType), 7),
			protowire.AppendFixed32(tag(100, protowire.Fixed32Type), 7),
			protowire.AppendFixed64(tag(101, protowire.Fixed64Type), 7),
			field(102, []byte("x")),
			tag(103, protowire.StartGroupType), protowire.AppendVarint(tag(1, protowire.VarintType), 1), tag(103, protowire.EndGroupType),
		)},
		{name: "known field in another wire type is unknown", in: cat(protowire.AppendVarint(tag(respVersion, protowire.VarintType), 3), field(respNonce, []byte("n"))),
			check: func(t *testing.T, r *response) {
				if r.version != "" || r.nonce != "n" {
					t.Errorf("%+v", r)
				}
			}},
		{name: "last value wins", in: cat(field(respNonce, []byte("a")), field(respNonce, []byte("b"))),
			check: func(t *testing.T, r *response) {
				if r.nonce != "b" {
					t.Errorf("nonce %q", r.nonce)
				}
			}},
		{name: "a Resource's Any twice merges", delta: true, in: field(respResources, cat(
			field(resAny, field(anyTypeURL, []byte("u"))),
			field(resAny, field(anyValue, []byte("v"))),
		)), check: func(t *testing.T, r *response) {
			if string(r.bytes(r.res[0].typeURL)) != "u" || string(r.bytes(r.res[0].value)) != "v" {
				t.Errorf("%+v", r.res[0])
			}
		}},
		{name: "truncated", in: sotw[:len(sotw)-1], err: "unexpected EOF"},
		{name: "truncated delta", in: delta[:len(delta)-1], delta: true, err: "unexpected EOF"},
		{name: "length past the end", in: []byte{0x12, 0x05, 0x0a}, err: "field 2: unexpected EOF"},
		{name: "truncated tag", in: []byte{0x80}, err: "tag at byte 0: unexpected EOF"},
		{name: "field number 0", in: []byte{0x02, 0x00}, err: "invalid field number"},
		{name: "field number out of range", in: protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3|2), err: "out of range"},
		{name: "end group without start", in: tag(7, protowire.EndGroupType), err: "end group"},
		{name: "reserved wire type", in: []byte{0x0e}, err: "reserved wire type"},
		{name: "varint overflow", in: []byte{0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, err: "overflow"},
		{name: "bad UTF-8 nonce", in: field(respNonce, []byte{0xff}), err: "field 5: invalid UTF-8"},
		{name: "bad UTF-8 Any type_url", in: field(respResources, field(anyTypeURL, []byte{0xff})), err: "resources[0]: Any type_url: invalid UTF-8"},
		{name: "bad UTF-8 removed", delta: true, in: field(respRemoved, []byte{0xff}), err: "field 6: invalid UTF-8"},
		{name: "bad UTF-8 Resource name", delta: true, in: field(respResources, field(resName, []byte{0xff})), err: "invalid UTF-8"},
		{name: "bad UTF-8 alias", delta: true, in: field(respResources, field(4, []byte{0xff})), err: "invalid UTF-8"},
		{name: "bad control_plane", in: field(6, []byte{0x0a, 0x05}), err: "field 6"},
		{name: "bad resource_errors", in: field(7, []byte{0xff}), err: "field 7"},
		{name: "bad ttl", delta: true, in: field(respResources, field(6, []byte{0x08})), err: "Resource field 6"},
		{name: "bad Any inside a Resource", delta: true, in: field(respResources, field(resAny, []byte{0x0a, 0x09})), err: "Resource resource"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := checkDecode(t, c.in, c.delta)
			if c.err == "" && err != nil {
				t.Fatal(err)
			}
			if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("error %v, want one with %q", err, c.err)
			}
			if c.check != nil && r != nil {
				c.check(t, r)
			}
		})
	}
}

// TestDecodeTruncations cuts well-formed responses at every byte.
func TestDecodeTruncations(t *testing.T) {
	for _, c := range []struct {
		b     []byte
		delta bool
	}{{sampleSotW(t), false}, {sampleDelta(t), true}} {
		for i := range c.b {
			_, _ = checkDecode(t, c.b[:i], c.delta)
		}
	}
}

func TestDecodeDigest(t *testing.T) {
	a, b := &response{}, &response{}
	in := sampleSotW(t)
	if err := a.decode(in); err != nil {
		t.Fatal(err)
	}
	// The same resources with another version and nonce: the same digest.
	other := marshal(t, &discovery.DiscoveryResponse{VersionInfo: "v9", Nonce: "n9", TypeUrl: Cluster.URL(), Resources: []*anypb.Any{
		{TypeUrl: Cluster.URL(), Value: []byte{0x0a, 0x01, 'a'}}, {TypeUrl: Cluster.URL()}, {},
	}})
	if err := b.decode(other); err != nil {
		t.Fatal(err)
	}
	if a.digest != b.digest {
		t.Errorf("same resources, digests %x and %x", a.digest, b.digest)
	}
	c := &response{delta: true}
	d := &response{delta: true}
	_ = c.decode(cat(field(respResources, field(resName, []byte("a"))), field(respRemoved, []byte("b"))))
	_ = d.decode(cat(field(respResources, field(resName, []byte("a"))), field(respResources, field(resName, []byte("b")))))
	if c.digest == d.digest {
		t.Error("a removal and a resource have one digest")
	}
}

func TestCodecUnmarshal(t *testing.T) {
	in := sampleSotW(t)
	// Split across buffers, as frames arrive.
	data := mem.BufferSlice{mem.SliceBuffer(in[:3]), mem.SliceBuffer(in[3:10]), mem.SliceBuffer(in[10:])}
	var r response
	if err := clientCodec.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if r.size() != len(in) || r.nonce != "n1" || len(r.elems) != 3 {
		t.Fatalf("%+v", r)
	}
	r.release()
	if r.buf != nil || r.pooled != nil {
		t.Fatal("release kept the buffer")
	}
	var w discovery.DiscoveryResponse
	if err := clientCodec.Unmarshal(data, &w); err != nil || w.GetNonce() != "n1" {
		t.Fatalf("fallback: %v %v", err, &w)
	}
}

func FuzzDecodeResponse(f *testing.F) {
	f.Add(sampleSotW(f), false)
	f.Add(sampleDelta(f), true)
	f.Add([]byte{}, false)
	f.Add(field(respResources, cat(field(resAny, field(anyTypeURL, []byte("u"))), field(resAny, field(anyValue, []byte("v"))))), true)
	f.Add(cat(tag(103, protowire.StartGroupType), tag(103, protowire.EndGroupType)), false)
	f.Fuzz(func(t *testing.T, b []byte, delta bool) {
		_, _ = checkDecode(t, b, delta)
	})
}
