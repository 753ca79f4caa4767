package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/baremesh/baremesh/nodeagent/tunnel"
)

// TunnelFile is tunnel.yaml, the configuration of the node tunnel kept
// without the agent (baremesh-agent tunnel up|down|run): the tunnel's
// settings and the two namespaces ("" is the caller's own).
type TunnelFile struct {
	tunnel.Config `yaml:",inline"`
	NodeNetNS     string        `yaml:"nodeNetns"`
	ProxyNetNS    string        `yaml:"proxyNetns"`
	Backend       string        `yaml:"backend"`  // nft, legacy or empty to detect
	Interval      time.Duration `yaml:"interval"` // between reconcile passes; default 10s
}

// LoadTunnelFile reads and checks a tunnel.yaml: unknown fields and
// invalid settings are errors naming the file.
func LoadTunnelFile(path string) (TunnelFile, error) {
	var tf TunnelFile
	data, err := os.ReadFile(path)
	if err != nil {
		return tf, fmt.Errorf("config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&tf); err != nil && !errors.Is(err, io.EOF) {
		return tf, fmt.Errorf("%s: not valid tunnel YAML: %w", path, err)
	}
	if err := tf.Config.WithDefaults().Validate(); err != nil {
		return tf, fmt.Errorf("%s: %w", path, err)
	}
	if tf.Interval == 0 {
		tf.Interval = 10 * time.Second
	}
	return tf, nil
}

// TunnelMark is the mark of the node tunnel configured in path: an
// agent.yaml (its tunnel: section) or a tunnel.yaml, so that the CNI
// plugin's enrolments carry the mark the tunnel redirects (cni install
// -tunnel-config). An unset mark is the tunnel's default.
func TunnelMark(path string) (uint32, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var doc struct {
		Tunnel        *tunnel.Config `yaml:"tunnel"`
		tunnel.Config `yaml:",inline"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	c := doc.Config
	if doc.Tunnel != nil {
		c = *doc.Tunnel
	}
	return c.WithDefaults().Mark, nil
}
