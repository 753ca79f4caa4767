package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
	meshv1alpha1 "istio.io/api/mesh/v1alpha1"
	"sigs.k8s.io/yaml"
)

// LoadMeshNetworks reads a meshNetworks file (Istio's MeshNetworks, the
// "meshNetworks" key of istiod's ConfigMap); a missing or empty file is
// no networks (nil).
func LoadMeshNetworks(path string) (*meshv1alpha1.MeshNetworks, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mesh networks: %w", err)
	}
	return ParseMeshNetworks(data, path)
}

// ParseMeshNetworks parses a meshNetworks document ("networks: {NAME:
// {endpoints: [...], gateways: [{address, port}]}}"); nil when it is
// empty. Errors are *DocError naming file (and the line when known): an
// unknown field, a gateway without an address or registryServiceName, a
// port outside 1-65535.
func ParseMeshNetworks(data []byte, file string) (*meshv1alpha1.MeshNetworks, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		line := 0
		if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
		}
		return nil, &DocError{File: file, Line: line, Err: fmt.Errorf("%w: %v", ErrParse, err)}
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil, nil
	}
	n := &meshv1alpha1.MeshNetworks{}
	if err := protojson.Unmarshal(js, n); err != nil {
		msg := cleanProtoJSONError(err)
		line := 0
		if m := unknownFieldRE.FindStringSubmatch(msg); m != nil {
			line = lineOfKey(data, m[1])
		}
		return nil, &DocError{File: file, Line: line, Err: fmt.Errorf("%w: %s", ErrInvalid, msg)}
	}
	for name, nw := range n.GetNetworks() {
		for i, gw := range nw.GetGateways() {
			where := fmt.Sprintf("networks.%s.gateways[%d]", name, i)
			if gw.GetAddress() == "" && gw.GetRegistryServiceName() == "" {
				return nil, &DocError{File: file, Line: lineOfKey(data, name), Err: fmt.Errorf("%w: %s: address or registryServiceName is required", ErrInvalid, where)}
			}
			if gw.GetPort() == 0 || gw.GetPort() > 65535 {
				return nil, &DocError{File: file, Line: lineOfKey(data, name), Err: fmt.Errorf("%w: %s: port %d is not in 1-65535", ErrInvalid, where, gw.GetPort())}
			}
		}
	}
	return n, nil
}
