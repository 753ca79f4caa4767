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
	"strings"

	"github.com/baremesh/baremesh/internal/daemonconfig"
)

// common holds the flags every command takes.
type common struct {
	config   string
	stateDir string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.config, "config", daemonconfig.DefaultConfigFile, "baremeshd's config file (for stateDir, caCertsDir, configDirs, meshConfig)")
	fs.StringVar(&c.stateDir, "state-dir", "", "state directory (default: the config's stateDir, "+daemonconfig.Defaults().StateDir+")")
}

// load reads the daemon's config. A missing config file is an error
// naming it, unless it is the default one and --state-dir is given (the
// token commands need nothing else): falling back to the packaged
// defaults would touch a state directory the running daemon may not use.
func (c *common) load() (daemonconfig.Config, error) {
	cfg, err := daemonconfig.ReadFile(c.config)
	if errors.Is(err, fs.ErrNotExist) && c.config == daemonconfig.DefaultConfigFile && c.stateDir != "" {
		cfg, err = daemonconfig.Defaults(), nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return cfg, fmt.Errorf("config file %s not found: pass --config FILE, the baremesh.yaml baremeshd runs with (or --state-dir DIR for the token commands)", c.config)
	}
	if err != nil {
		return cfg, err
	}
	if c.stateDir != "" {
		cfg.StateDir = c.stateDir
	}
	return cfg, nil
}

func tokenDir(cfg daemonconfig.Config) string { return filepath.Join(cfg.StateDir, "tokens") }

// subcommand is one "token ..." or "vm ..." command.
type subcommand struct {
	name string // "token create"
	run  func(args []string, stdout, stderr io.Writer) int
}

var subcommands = []subcommand{
	{"token create", tokenCreate},
	{"token list", tokenList},
	{"token revoke", tokenRevoke},
	{"vm bootstrap", vmBootstrap},
}

// Main runs "token ..." or "vm ..." (args start with the command name).
// Flags may come before the subcommand (token --config F create).
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) >= 2 {
		if i := verbIndex(args[1:]); i >= 0 {
			name := args[0] + " " + args[1+i]
			for _, sc := range subcommands {
				if sc.name == name {
					rest := append(append([]string{}, args[1:1+i]...), args[2+i:]...)
					return sc.run(rest, stdout, stderr)
				}
			}
		}
	}
	fmt.Fprint(stderr, Usage)
	return 2
}

// verbIndex finds the subcommand among args: the first argument that is
// neither a flag nor a flag's value (every flag of these commands takes
// a value but --envoy, --autoregister, --capture-dns and help).
func verbIndex(args []string) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return i
		}
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		switch name {
		case "envoy", "autoregister", "capture-dns", "h", "help":
			continue
		}
		i++ // the flag's value
	}
	return -1
}

// Help writes the usage, flags and examples of command ("token" or "vm")
// to w.
func Help(w io.Writer, command string) {
	for _, sc := range subcommands {
		if strings.HasPrefix(sc.name, command+" ") {
			sc.run([]string{"-h"}, w, w)
			fmt.Fprintln(w)
		}
	}
}

// flags makes a subcommand's flag set; -h prints its usage, flags and
// examples and exits 0 (see parseFlags).
func flags(name, synopsis, examples string, stderr io.Writer) *flag.FlagSet {
	f := flag.NewFlagSet(name, flag.ContinueOnError)
	f.SetOutput(stderr)
	f.Usage = func() {
		fmt.Fprintf(f.Output(), "usage: baremeshctl %s %s\n\nflags:\n", name, synopsis)
		f.PrintDefaults()
		if examples != "" {
			fmt.Fprintf(f.Output(), "\nexamples:\n%s", examples)
		}
	}
	return f
}

// parseFlags parses args; ok false means return code (0 after -h).
func parseFlags(f *flag.FlagSet, args []string) (code int, ok bool) {
	if err := f.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	return 0, true
}

// Usage lists the commands.
const Usage = `       baremeshctl token create --namespace NS --service-account SA [--group WG] [--ttl 1h] [--uses N]
       baremeshctl token list
       baremeshctl token revoke ID
       baremeshctl vm bootstrap --namespace NS --group WG --out DIR [--address HOST:PORT] [--ttl 1h] [--uses N] [--autoregister=false]
       baremeshctl vm bootstrap --envoy --ip VM_IP --namespace NS --group WG --out DIR [--address TLS_HOST:PORT] [--name NAME] [--ttl 8760h]
       (token and vm take --config FILE (default /etc/baremesh/baremesh.yaml) and --state-dir DIR, before or after the subcommand;
        baremeshctl help token, baremeshctl help vm: every flag, with examples)
`

func fail(stderr io.Writer, err error) int {
	fmt.Fprintln(stderr, "baremeshctl:", err)
	return 1
}
