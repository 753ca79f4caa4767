// Command baremesh-agent is the host agent: it captures the host's traffic
// into the local proxy with iptables, keeps the rules in place, supervises
// the proxy and reports status. All logic lives in nodeagent/agent.
//
//	baremesh-agent [-config /etc/baremesh/agent.yaml] [-dry-run]  (SIGHUP reloads the config)
//	baremesh-agent uninstall [-config ...] [-dry-run]
//	baremesh-agent version
//	baremesh-agent cni install|uninstall [flags]  (cni_linux.go)
//	baremesh-agent cni repair [flags]  (repair_linux.go)
//	baremesh-agent tunnel up|down|run -config FILE  (tunnel_linux.go)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/baremesh/baremesh/internal/version"
	"github.com/baremesh/baremesh/nodeagent/agent"
	"github.com/baremesh/baremesh/nodeagent/iptables"
)

func main() { os.Exit(mainProcess(os.Args[1:], os.Stdout, os.Stderr)) }

// mainProcess is main with its signals: SIGTERM and SIGINT stop the
// command; SIGHUP reloads the agent's config (systemctl reload).
func mainProcess(args []string, stdout, stderr io.Writer) int {
	if code, done := helpOrVersion(args, stdout, stderr); done {
		return code
	}
	var hup chan os.Signal
	if agentRuns(args) {
		// Registered before anything can be slow: SIGHUP's default
		// action would end the agent.
		hup = make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return run(ctx, args, stdout, stderr, hup)
}

// agentRuns: args run the agent, not one of its subcommands.
func agentRuns(args []string) bool {
	return len(args) == 0 || (args[0] != "cni" && args[0] != "tunnel" && args[0] != "uninstall" && args[0] != "version")
}

// run is main without the process: it returns the exit code. Each value
// received on hup reloads the running agent's config.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, hup <-chan os.Signal) int {
	if len(args) > 0 && args[0] == "cni" {
		return runCNI(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "tunnel" {
		return runTunnel(ctx, args[1:], stdout, stderr) // tunnel_linux.go
	}
	cmd := "run"
	if len(args) > 0 && (args[0] == "uninstall" || args[0] == "version" || args[0] == "run") {
		cmd, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("baremesh-agent "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", agent.DefaultConfigPath, "agent configuration file")
	dryRun := fs.Bool("dry-run", false, "print the iptables-restore payloads instead of applying them")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if cmd == "version" {
		fmt.Fprintln(stdout, version.Version)
		return 0
	}
	cfg, err := agent.Load(*configPath)
	if err != nil {
		fmt.Fprintf(stderr, "baremesh-agent: %v\n", err)
		return 1
	}
	level := new(slog.LevelVar)
	log := agent.NewLogger(cfg.Log, level, stderr).With("component", "agent")
	var dry io.Writer
	if *dryRun {
		dry = stdout
	}
	if cmd == "uninstall" {
		if err := agent.Uninstall(ctx, log, cfg, dry); err != nil {
			return fail(stderr, err)
		}
		log.Info("capture rules and policy routing removed")
		return 0
	}
	a, err := agent.New(ctx, log, cfg, agent.Options{DryRun: dry, ConfigPath: *configPath, Level: level, Reloads: hup})
	if err != nil {
		return fail(stderr, err)
	}
	log.Info("starting", "version", version.Version, "config", *configPath, "dryRun", *dryRun)
	if err := a.Run(ctx); err != nil {
		return fail(stderr, err)
	}
	return 0
}

func fail(stderr io.Writer, err error) int {
	hint := ""
	switch {
	case errors.Is(err, iptables.ErrNotRoot):
		hint = " (run as root, or use -dry-run to see what would be applied)"
	case errors.Is(err, iptables.ErrIptablesMissing):
		hint = " (apt-get install iptables)"
	}
	fmt.Fprintf(stderr, "baremesh-agent: %v%s\n", err, hint)
	return 1
}

// agentUsage lists every command (--help, help; man page baremesh-agent.8).
const agentUsage = `usage: baremesh-agent [COMMAND] [flags]

commands:
  run             capture the host's traffic into the local proxy, supervise it, report status (the default; SIGHUP reloads)
  uninstall       remove the capture rules the agent installed
  cni install     install the baremesh-cni plugin and its conflist on a Kubernetes node
  cni uninstall   remove the plugin and its conflist entry
  cni repair      label or delete pods whose traffic capture was not set up
  tunnel up       create the node tunnel to the node proxy (ambient) and exit
  tunnel down     remove the node tunnel
  tunnel run      keep the node tunnel in place until stopped
  version         print the version
  help            this list

run and uninstall take -config FILE (default /etc/baremesh/agent.yaml) and -dry-run;
"baremesh-agent COMMAND -h" lists a command's flags.
`

// helpOrVersion answers --help, help, --version and unknown commands
// before anything starts; done is false for a command to run.
func helpOrVersion(args []string, stdout, stderr io.Writer) (code int, done bool) {
	if len(args) == 0 {
		return 0, false
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprintf(stdout, "baremesh-agent %s: the baremesh node agent.\n\n%s", version.Version, agentUsage)
		return 0, true
	case "--version", "-version":
		fmt.Fprintln(stdout, version.Version)
		return 0, true
	case "run", "uninstall", "version", "cni", "tunnel":
		return 0, false
	}
	if len(args[0]) > 0 && args[0][0] == '-' {
		return 0, false // flags of run
	}
	fmt.Fprintf(stderr, "baremesh-agent: unknown command %q\n%s", args[0], agentUsage)
	return 2, true
}
