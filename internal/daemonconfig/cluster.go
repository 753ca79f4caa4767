package daemonconfig

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
)

// ClusterConfig is the cluster: block of baremesh.yaml.
type ClusterConfig struct {
	// Name is this replica's name, unique in the cluster (default: the
	// host name).
	Name string `json:"name"`
	// Bind is the gossip address HOST:PORT (TCP and UDP; memberlist's
	// usual port is 7946); empty means no cluster.
	Bind string `json:"bind"`
	// Advertise is the address the other replicas reach this one at, when
	// not Bind (a 0.0.0.0 bind, NAT).
	Advertise string `json:"advertise"`
	// Seeds are HOST:PORT of other replicas; one that answers is enough.
	Seeds []string `json:"seeds"`
	// KeyFile holds the gossip key, base64 of 16, 24 or 32 random bytes
	// (AES-128/192/256-GCM), the same on every replica; readable by its
	// owner only. Empty sends gossip in the clear. Relative to the config
	// file.
	KeyFile string `json:"keyFile"`
}

// Enabled reports whether a cluster is configured.
func (c ClusterConfig) Enabled() bool { return c.Bind != "" }

func (c ClusterConfig) validate() []error {
	if !c.Enabled() {
		if len(c.Seeds) > 0 || c.KeyFile != "" || c.Advertise != "" {
			return []error{errors.New("cluster: bind is required when seeds, advertise or keyFile are set")}
		}
		return nil
	}
	var errs []error
	if _, _, err := net.SplitHostPort(c.Bind); err != nil {
		errs = append(errs, fmt.Errorf("cluster.bind: %q is not HOST:PORT: %v", c.Bind, err))
	}
	if c.Advertise != "" {
		if _, _, err := net.SplitHostPort(c.Advertise); err != nil {
			errs = append(errs, fmt.Errorf("cluster.advertise: %q is not HOST:PORT: %v", c.Advertise, err))
		}
	}
	for i, s := range c.Seeds {
		if _, _, err := net.SplitHostPort(s); err != nil {
			errs = append(errs, fmt.Errorf("cluster.seeds[%d]: %q is not HOST:PORT: %v", i, s, err))
		}
	}
	if c.KeyFile != "" {
		if _, err := ReadClusterKey(c.KeyFile); err != nil {
			errs = append(errs, fmt.Errorf("cluster.keyFile: %w", err))
		}
	}
	return errs
}

// ReadClusterKey reads a gossip key file: base64 of 16, 24 or 32 bytes,
// not readable by group or others.
func ReadClusterKey(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s: mode %v lets others read the cluster key; chmod 600 it", path, st.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, fmt.Errorf("%s: not base64: %v (make one with: head -c 32 /dev/urandom | base64)", path, err)
	}
	switch len(key) {
	case 16, 24, 32:
		return key, nil
	}
	return nil, fmt.Errorf("%s: key is %d bytes, want 16, 24 or 32", path, len(key))
}
