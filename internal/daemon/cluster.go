package daemon

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/baremesh/baremesh/core/cluster"
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

// ClusterOptions is core/cluster's configuration for this daemon: grace
// is the registration grace period, which the table enforces cluster-wide.
// Without a cluster it is a table of one (cluster.Options.Bind empty).
func (c Config) ClusterOptions(grace time.Duration, logger *slog.Logger) (cluster.Options, error) {
	cc := c.Cluster
	o := cluster.Options{Name: cc.Name, Bind: cc.Bind, Advertise: cc.Advertise, Seeds: cc.Seeds, Grace: grace,
		Logger: logger.With("component", "cluster")}
	if o.Name == "" {
		h, err := os.Hostname()
		if err != nil {
			return o, fmt.Errorf("cluster.name: not set and no host name: %w", err)
		}
		o.Name = h
	}
	if cc.KeyFile != "" {
		key, err := ReadClusterKey(cc.KeyFile)
		if err != nil {
			return o, fmt.Errorf("cluster.keyFile: %w", err)
		}
		o.SecretKey = key
	}
	return o, nil
}

// startCluster starts this replica's registration table (a table of one
// without a cluster: block) and serves /debug/clusterz. Called by New with
// a cluster (auto-registration claims through it), else by Run. The grace
// period is registrationGrace: the table enforces it cluster-wide.
func (d *Daemon) startCluster() error {
	o, err := d.cfg.ClusterOptions(d.cfg.RegistrationGrace.Duration, d.log)
	if err != nil {
		return err
	}
	var t *cluster.Table
	o.Metrics = cluster.NewMetrics(d.reg, func() int { return t.NumMembers() })
	if t, err = cluster.New(o); err != nil {
		return err
	}
	d.cluster = t
	if d.cfg.Cluster.Enabled() {
		d.log.Info("cluster replica started", "name", o.Name, "gossip", t.Addr(), "seeds", o.Seeds, "encrypted", len(o.SecretKey) > 0)
	}
	return nil
}

// abortCluster closes a table started by New when New fails later.
func (d *Daemon) abortCluster() {
	if d.cluster != nil {
		_ = d.cluster.Shutdown(false)
		d.cluster = nil
	}
}

// stopCluster leaves the cluster cleanly: the others take over this
// replica's entries at once instead of after failure detection.
func (d *Daemon) stopCluster() {
	if err := d.cluster.Shutdown(true); err != nil {
		d.log.Warn("cluster: leaving", "err", err)
	}
}

// clusterz serves /debug/clusterz.
func (d *Daemon) clusterz(w http.ResponseWriter, r *http.Request) {
	if d.cluster == nil {
		http.Error(w, "cluster not started", http.StatusServiceUnavailable)
		return
	}
	d.cluster.Handler().ServeHTTP(w, r)
}

// Cluster is this replica's registration table (nil before Run when no
// cluster is configured). Tests use it to stop a replica without leaving,
// as a crash does.
func (d *Daemon) Cluster() *cluster.Table { return d.cluster }
