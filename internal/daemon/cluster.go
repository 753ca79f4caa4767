package daemon

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/baremesh/baremesh/core/cluster"
	"github.com/baremesh/baremesh/internal/daemonconfig"
)

// clusterOptions is core/cluster's configuration for this daemon: grace
// is the registration grace period, which the table enforces cluster-wide.
// Without a cluster it is a table of one (cluster.Options.Bind empty).
func clusterOptions(c daemonconfig.Config, grace time.Duration, logger *slog.Logger) (cluster.Options, error) {
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
		key, err := daemonconfig.ReadClusterKey(cc.KeyFile)
		if err != nil {
			return o, fmt.Errorf("cluster.keyFile: %w", err)
		}
		o.SecretKey = key
	}
	return o, nil
}

// startCluster starts this replica's registration table (a table of one
// without a cluster: block), which auto-registration claims through;
// called by New. The grace period is registrationGrace: the table
// enforces it cluster-wide.
func (d *Daemon) startCluster() error {
	o, err := clusterOptions(d.cfg, d.cfg.RegistrationGrace.Duration, d.log)
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

// abortCluster closes a table started by New when New fails later, and
// abandons the auto-registration controller on it without a save (a
// refused start writes nothing into the state directory).
func (d *Daemon) abortCluster() {
	if d.wl != nil {
		d.wl.Abandon()
	}
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

// Cluster is this replica's registration table. Tests use it to stop a replica without leaving,
// as a crash does.
func (d *Daemon) Cluster() *cluster.Table { return d.cluster }
