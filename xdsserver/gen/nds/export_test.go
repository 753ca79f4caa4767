package nds

import "google.golang.org/protobuf/proto"

// ReflectMessage exposes the field-by-field form for the encoding test.
func (t Table) ReflectMessage() proto.Message { return t.reflectMessage() }
