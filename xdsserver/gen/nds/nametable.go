package nds

import (
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// TypeURL is the type URL of Istio's DNS name table.
const TypeURL = "type.googleapis.com/istio.networking.nds.v1.NameTable"

// The NameTable message is Istio's istio.networking.nds.v1.NameTable
// (istio/istio pkg/dns/proto/nds.proto). No library module ships its
// generated Go type: istio.io/api does not have it, and baremesh must
// not depend on istio.io/istio. So its descriptor is declared here, field
// for field as in nds.proto, and messages are dynamicpb messages of it:
// proto.Marshal gives the same bytes as Istio's generated type, and the
// full name (hence the Any type URL) is Istio's.
//
//	message NameTable {
//	  message NameInfo {
//	    repeated string ips = 1;
//	    string registry = 2;
//	    string shortname = 3;
//	    string namespace = 4;
//	    repeated string alt_hosts = 5 [deprecated = true];
//	  }
//	  map<string, NameInfo> table = 1;
//	}
var (
	tableDesc protoreflect.MessageDescriptor
	infoDesc  protoreflect.MessageDescriptor
	tableType protoreflect.MessageType
	infoType  protoreflect.MessageType

	fTable, fIPs, fRegistry, fShortname, fNamespace protoreflect.FieldDescriptor
)

func init() {
	fd, err := protodesc.NewFile(fileProto(), protoregistry.GlobalFiles)
	if err != nil {
		panic(fmt.Sprintf("nds: NameTable descriptor: %v", err))
	}
	// Registered so that the debug pages (protojson of an Any) and
	// clients in this binary resolve the type. A binary that links
	// Istio's own generated type already has it: then that one is used.
	if d, err := protoregistry.GlobalFiles.FindDescriptorByName("istio.networking.nds.v1.NameTable"); err == nil {
		fd = d.ParentFile()
	} else {
		_ = protoregistry.GlobalFiles.RegisterFile(fd)
	}
	tableDesc = fd.Messages().ByName("NameTable")
	infoDesc = tableDesc.Messages().ByName("NameInfo")
	if mt, err := protoregistry.GlobalTypes.FindMessageByName(tableDesc.FullName()); err == nil {
		tableType = mt
	} else {
		tableType = dynamicpb.NewMessageType(tableDesc)
		_ = protoregistry.GlobalTypes.RegisterMessage(tableType)
	}
	if mt, err := protoregistry.GlobalTypes.FindMessageByName(infoDesc.FullName()); err == nil {
		infoType = mt
	} else {
		infoType = dynamicpb.NewMessageType(infoDesc)
		_ = protoregistry.GlobalTypes.RegisterMessage(infoType)
	}
	fTable = tableDesc.Fields().ByNumber(1)
	f := infoDesc.Fields()
	fIPs, fRegistry, fShortname, fNamespace = f.ByNumber(1), f.ByNumber(2), f.ByNumber(3), f.ByNumber(4)
}

// fileProto is nds.proto as a FileDescriptorProto.
func fileProto() *descriptorpb.FileDescriptorProto {
	str, rep, opt := descriptorpb.FieldDescriptorProto_TYPE_STRING, descriptorpb.FieldDescriptorProto_LABEL_REPEATED, descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL
	msg := descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
	field := func(name, json string, n int32, label descriptorpb.FieldDescriptorProto_Label, typ descriptorpb.FieldDescriptorProto_Type, typeName string) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), JsonName: proto.String(json), Number: proto.Int32(n), Label: label.Enum(), Type: typ.Enum()}
		if typeName != "" {
			f.TypeName = proto.String(typeName)
		}
		return f
	}
	alt := field("alt_hosts", "altHosts", 5, rep, str, "")
	alt.Options = &descriptorpb.FieldOptions{Deprecated: proto.Bool(true)}
	return &descriptorpb.FileDescriptorProto{
		Name:    proto.String("dns/proto/nds.proto"),
		Package: proto.String("istio.networking.nds.v1"),
		Syntax:  proto.String("proto3"),
		Options: &descriptorpb.FileOptions{GoPackage: proto.String("istio.io/istio/pkg/dns/proto/istio_networking_nds_v1")},
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("NameTable"),
			Field: []*descriptorpb.FieldDescriptorProto{
				field("table", "table", 1, rep, msg, ".istio.networking.nds.v1.NameTable.TableEntry"),
			},
			NestedType: []*descriptorpb.DescriptorProto{
				{
					Name: proto.String("NameInfo"),
					Field: []*descriptorpb.FieldDescriptorProto{
						field("ips", "ips", 1, rep, str, ""),
						field("registry", "registry", 2, opt, str, ""),
						field("shortname", "shortname", 3, opt, str, ""),
						field("namespace", "namespace", 4, opt, str, ""),
						alt,
					},
				},
				{
					Name: proto.String("TableEntry"),
					Field: []*descriptorpb.FieldDescriptorProto{
						field("key", "key", 1, opt, str, ""),
						field("value", "value", 2, opt, msg, ".istio.networking.nds.v1.NameTable.NameInfo"),
					},
					Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
				},
			},
		}},
	}
}

// Info is one host's entry of a name table.
type Info struct {
	// IPs are the host's addresses, as the agent answers A and AAAA
	// queries with them.
	IPs []string
	// Registry is "Kubernetes" for a Kubernetes Service (then the agent
	// also answers the short forms Shortname, Shortname.Namespace and
	// Shortname.Namespace.svc), else "External".
	Registry  string
	Shortname string
	Namespace string
}

// Table is a name table: host to entry.
type Table map[string]*Info

// Message returns t as an istio.networking.nds.v1.NameTable message.
//
// The message carries its encoding as unknown fields of an empty
// NameTable: entries sorted by host, fields in number order, empty ones
// left out, which is byte for byte what a deterministic proto.Marshal of
// the same table as Istio's generated type gives (a test checks it
// against dynamicpb's own encoding). Building and marshalling a dynamicpb
// map of a thousand entries cost ~10 ms per proxy; this costs a fraction
// of it. So proto.Marshal gives the table's bytes, and anything that
// decodes them (the agent, Parse, the debug pages) sees the entries; the
// returned message's own fields are empty.
func (t Table) Message() proto.Message {
	m := tableType.New()
	m.SetUnknown(t.encode())
	return m.Interface()
}

// encode is the table's wire form.
func (t Table) encode() []byte {
	hosts := slices.Sorted(maps.Keys(t))
	size := 0
	for _, h := range hosts {
		e := entrySize(h, t[h])
		size += protowire.SizeTag(1) + protowire.SizeBytes(e)
	}
	b := make([]byte, 0, size)
	for _, h := range hosts {
		in := t[h]
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(entrySize(h, in)))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, h)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(in.size()))
		for _, ip := range in.IPs {
			b = protowire.AppendTag(b, 1, protowire.BytesType)
			b = protowire.AppendString(b, ip)
		}
		for i, s := range [3]string{in.Registry, in.Shortname, in.Namespace} {
			if s != "" {
				b = protowire.AppendTag(b, protowire.Number(i+2), protowire.BytesType)
				b = protowire.AppendString(b, s)
			}
		}
	}
	return b
}

// entrySize is the size of a map entry (key 1, value 2).
func entrySize(host string, in *Info) int {
	return protowire.SizeTag(1) + protowire.SizeBytes(len(host)) + protowire.SizeTag(2) + protowire.SizeBytes(in.size())
}

// size is the encoded size of a NameInfo.
func (in *Info) size() int {
	n := 0
	for _, ip := range in.IPs {
		n += protowire.SizeTag(1) + protowire.SizeBytes(len(ip))
	}
	for _, s := range [3]string{in.Registry, in.Shortname, in.Namespace} {
		if s != "" {
			n += protowire.SizeTag(2) + protowire.SizeBytes(len(s))
		}
	}
	return n
}

// reflectMessage builds t field by field as a dynamicpb message (the
// slow way, for the test that checks encode against it).
func (t Table) reflectMessage() proto.Message {
	m := tableType.New()
	mp := m.Mutable(fTable).Map()
	for host, in := range t {
		v := mp.NewValue()
		im := v.Message()
		if len(in.IPs) > 0 {
			l := im.Mutable(fIPs).List()
			for _, ip := range in.IPs {
				l.Append(protoreflect.ValueOfString(ip))
			}
		}
		for f, s := range map[protoreflect.FieldDescriptor]string{fRegistry: in.Registry, fShortname: in.Shortname, fNamespace: in.Namespace} {
			if s != "" {
				im.Set(f, protoreflect.ValueOfString(s))
			}
		}
		mp.Set(protoreflect.ValueOfString(host).MapKey(), v)
	}
	return m.Interface()
}

// Parse reads a NameTable message's wire bytes (for tests and debug
// tools).
func Parse(b []byte) (Table, error) {
	m := tableType.New()
	if err := proto.Unmarshal(b, m.Interface()); err != nil {
		return nil, fmt.Errorf("name table: %w", err)
	}
	out := Table{}
	m.Get(fTable).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		im := v.Message()
		in := &Info{Registry: im.Get(fRegistry).String(), Shortname: im.Get(fShortname).String(), Namespace: im.Get(fNamespace).String()}
		l := im.Get(fIPs).List()
		for i := range l.Len() {
			in.IPs = append(in.IPs, l.Get(i).String())
		}
		out[k.String()] = in
		return true
	})
	return out, nil
}
