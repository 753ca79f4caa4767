package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/baremesh/baremesh/internal/daemonconfig"
)

func TestClustersDirIsRelativeToTheConfigFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "baremesh.yaml")
	if err := os.WriteFile(p, []byte("configDirs: [conf.d]\nclusters: clusters.d\nclusterDomain: corp.local\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := daemonconfig.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Clusters != filepath.Join(dir, "clusters.d") || cfg.ClusterDomain != "corp.local" {
		t.Fatalf("clusters = %q, clusterDomain = %q", cfg.Clusters, cfg.ClusterDomain)
	}
}
