// Package onboard is baremeshctl's identity commands: join tokens (token
// create|list|revoke) and the bootstrap files of a VM that runs Istio's
// agent (vm bootstrap). They work on the control host without baremeshd
// running: they read baremesh.yaml for the state directory, the CA and the
// config directories, and share the token store with the daemon under its
// file lock (core/identity.TokenStore).
package onboard

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/baremesh/baremesh/internal/daemon"
)

// common holds the flags every command takes.
type common struct {
	config   string
	stateDir string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.config, "config", daemon.DefaultConfigFile, "baremeshd's config file (for stateDir, caCertsDir, configDirs, meshConfig)")
	fs.StringVar(&c.stateDir, "state-dir", "", "state directory (default: the config's stateDir, "+daemon.Defaults().StateDir+")")
}

// load reads the daemon's config; a missing default file means defaults.
func (c *common) load() (daemon.Config, error) {
	cfg, err := daemon.ReadFile(c.config)
	if errors.Is(err, fs.ErrNotExist) && c.config == daemon.DefaultConfigFile {
		cfg, err = daemon.Defaults(), nil
	}
	if err != nil {
		return cfg, err
	}
	if c.stateDir != "" {
		cfg.StateDir = c.stateDir
	}
	return cfg, nil
}

func tokenDir(cfg daemon.Config) string { return filepath.Join(cfg.StateDir, "tokens") }

// Main runs "token ..." or "vm ..." (args start with the command name).
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) >= 2 {
		switch args[0] + " " + args[1] {
		case "token create":
			return tokenCreate(args[2:], stdout, stderr)
		case "token list":
			return tokenList(args[2:], stdout, stderr)
		case "token revoke":
			return tokenRevoke(args[2:], stdout, stderr)
		case "vm bootstrap":
			return vmBootstrap(args[2:], stdout, stderr)
		}
	}
	fmt.Fprint(stderr, Usage)
	return 2
}

// Usage lists the commands.
const Usage = `       baremeshctl token create --namespace NS --service-account SA [--group WG] [--ttl 1h] [--uses N]
       baremeshctl token list
       baremeshctl token revoke ID
       baremeshctl vm bootstrap --namespace NS --group WG --out DIR [--address HOST:PORT] [--ttl 1h] [--uses N]
       baremeshctl vm bootstrap --envoy --ip VM_IP --namespace NS --group WG --out DIR [--address XDS_HOST:PORT] [--name NAME]
       (token and vm take --config FILE (default /etc/baremesh/baremesh.yaml) and --state-dir DIR)
`

func fail(stderr io.Writer, err error) int {
	fmt.Fprintln(stderr, "baremeshctl:", err)
	return 1
}
