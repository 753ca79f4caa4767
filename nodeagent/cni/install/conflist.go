// Package install puts baremesh-cni on a Kubernetes node: it copies the
// binaries into the CNI bin dir, writes the plugin's kubeconfig, appends
// the plugin to the node's CNI configuration (chosen as istio-cni does),
// keeps it there when the main CNI rewrites the file, and takes it all out
// again on uninstall. The JSON editing (conflist.go) is pure.
//
// It must not import core/, sources/, xdsserver/ or cmd/.
package install

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrNoConfig: the CNI config dir holds no usable configuration yet (the
// main CNI has not written one); worth waiting for.
var ErrNoConfig = errors.New("no CNI network configuration found")

// PluginType is our "type" in a conflist.
const PluginType = "baremesh-cni"

// ChooseFile returns the configuration to chain into: name when given,
// else the first .conf, .conflist or .json file in lexical order that
// parses as a network configuration (istio-cni's rule).
func ChooseFile(dir, name string) (string, error) {
	if name != "" {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: %s: %w", ErrNoConfig, p, err)
		}
		return p, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("reading CNI config dir %s: %w", dir, err)
	}
	for _, e := range entries { // ReadDir sorts by name
		ext := filepath.Ext(e.Name())
		if e.IsDir() || (ext != ".conf" && ext != ".conflist" && ext != ".json") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var m map[string]any
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		if _, isList := m["plugins"]; isList || m["type"] != nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w in %s", ErrNoConfig, dir)
}

// Insert returns the configuration with plugin (our entry) as the last
// plugin, replacing an older entry of ours; a single-plugin .conf becomes a
// conflist. changed is false when data already ends with exactly plugin.
func Insert(data []byte, plugin map[string]any) (out []byte, changed bool, err error) {
	list, err := asList(data)
	if err != nil {
		return nil, false, err
	}
	plugins := list["plugins"].([]any)
	kept := slices.DeleteFunc(slices.Clone(plugins), isOurs)
	kept = append(kept, plugin)
	if equalJSON(plugins, kept) {
		return data, false, nil
	}
	list["plugins"] = kept
	out, err = json.MarshalIndent(list, "", "  ")
	return append(out, '\n'), true, err
}

// Remove returns the configuration without our plugin.
func Remove(data []byte) (out []byte, changed bool, err error) {
	list, err := asList(data)
	if err != nil {
		return nil, false, err
	}
	plugins := list["plugins"].([]any)
	kept := slices.DeleteFunc(slices.Clone(plugins), isOurs)
	if len(kept) == len(plugins) {
		return data, false, nil
	}
	list["plugins"] = kept
	out, err = json.MarshalIndent(list, "", "  ")
	return append(out, '\n'), true, err
}

// asList parses a .conf or .conflist into conflist form.
func asList(data []byte) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("parsing CNI configuration: %w", err)
	}
	if raw, ok := m["plugins"]; ok {
		if _, ok := raw.([]any); !ok {
			return nil, errors.New("parsing CNI configuration: \"plugins\" is not a list")
		}
		return m, nil
	}
	if _, ok := m["type"].(string); !ok {
		return nil, errors.New("parsing CNI configuration: neither \"plugins\" nor \"type\"")
	}
	list := map[string]any{"name": m["name"], "cniVersion": m["cniVersion"]}
	delete(m, "name")
	delete(m, "cniVersion")
	list["plugins"] = []any{m}
	return list, nil
}

func isOurs(p any) bool {
	m, ok := p.(map[string]any)
	return ok && m["type"] == PluginType
}

func equalJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// listPath is where a chosen file's conflist goes: a .conf becomes
// NAME.conflist (istio-cni does the same).
func listPath(p string) string {
	if strings.HasSuffix(p, ".conf") {
		return p + "list"
	}
	return p
}
