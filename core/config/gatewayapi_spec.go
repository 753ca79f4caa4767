package config

import (
	"bytes"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// DecodeSpec decodes the spec of a Gateway API config (a
// google.protobuf.Struct) into out, one of gwapi's spec types, strictly:
// a field gwapi does not know is an error naming it.
func DecodeSpec(c *Config, out any) error {
	st, ok := c.Spec.(*structpb.Struct)
	if !ok {
		return fmt.Errorf("%s: spec is %T, not a Gateway API spec", c.Key(), c.Spec)
	}
	js, err := protojson.Marshal(st)
	if err != nil {
		return fmt.Errorf("%s: %w", c.Key(), err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%s: %w", c.Key(), err)
	}
	return nil
}

// StructSpec builds the Struct spec of a Gateway API config from one of
// gwapi's spec types (for tests and writers).
func StructSpec(spec any) (*structpb.Struct, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("gateway API spec: %w", err)
	}
	st := &structpb.Struct{}
	if err := protojson.Unmarshal(js, st); err != nil {
		return nil, fmt.Errorf("gateway API spec: %w", err)
	}
	return st, nil
}
