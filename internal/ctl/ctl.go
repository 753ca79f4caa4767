// Package ctl is baremeshctl's command table and the commands that talk to
// a running baremeshd over its HTTP debug API (proxy-status, proxy-config,
// version) or read config offline (analyze). Every verb is one entry in
// Verbs; help, completion scripts and the man page are made from it.
//
// It reads the daemon only over HTTP (the JSON of /debug/syncz,
// /debug/config_dump, /debug/configz and /version), so it must not import
// xdsserver or the daemon's internals beyond internal/daemon's exported
// config helpers used by the offline verbs.
package ctl

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/baremesh/baremesh/internal/onboard"
	"github.com/baremesh/baremesh/internal/version"
)

// DefaultDaemon is the daemon's debug HTTP address as packaged
// (httpAddr in baremesh.yaml).
const DefaultDaemon = "http://127.0.0.1:15014"

// Env is what a command runs with: its output and the daemon to ask.
type Env struct {
	Stdout, Stderr io.Writer
	Daemon         string           // base URL of baremeshd's HTTP server
	Now            func() time.Time // the clock "N ago" is measured with
	HTTP           *http.Client
}

// Verb is one baremeshctl command.
type Verb struct {
	Name     string
	Synopsis string   // arguments, as in the usage line
	Summary  string   // one line for --help
	Subs     []string // subcommands and words completion offers
	Daemon   bool     // talks to a running baremeshd (takes --daemon)
	Run      func(e *Env, args []string) int
}

// Verbs is every command, in the order --help lists them. (It is set in
// init because help and completion read it.)
var Verbs []Verb

func init() { Verbs = verbs() }

func verbs() []Verb {
	return []Verb{
		{Name: "proxy-status", Synopsis: "[PROXY]", Daemon: true, Run: proxyStatus,
			Summary: "every connected proxy and, per xDS type, SYNCED, STALE or NACKED (with the reason) and since when"},
		{Name: "proxy-config", Synopsis: "clusters|listeners|routes|endpoints|secrets|all PROXY [-o table|json|yaml] [--fqdn H] [--port N] [--subset S] [--direction inbound|outbound]",
			Daemon: true, Run: proxyConfig, Subs: []string{"clusters", "listeners", "routes", "endpoints", "all"},
			Summary: "what baremeshd last sent one proxy, as tables or the raw resources"},
		{Name: "diff", Synopsis: "DIR... [--proxy PROXY] [-o text|json]", Daemon: true, Run: diffCmd,
			Summary: "dry run: what each connected proxy would receive differently if DIR replaced the config files (nothing is pushed)"},
		{Name: "analyze", Synopsis: "DIR...|--daemon URL", Run: analyzeCmd,
			Summary: "cross-resource problems with Istio's message codes (IST0101 ...), file:line"},
		{Name: "validate", Synopsis: "[--max-file-size N] [--max-documents N] [--max-nodes N] DIR|FILE...", Run: validateCmd, Summary: "check config files offline with baremeshd's parser and rules; exit 1 on problems"},
		{Name: "token", Synopsis: "create|list|revoke ...", Subs: []string{"create", "list", "revoke"}, Run: onboardCmd("token"),
			Summary: "join tokens a VM's Istio agent presents for its first certificate"},
		{Name: "vm", Synopsis: "bootstrap --namespace NS --group WG --out DIR [--envoy] ...", Subs: []string{"bootstrap"}, Run: onboardCmd("vm"),
			Summary: "the files a VM needs to join (Istio's agent, or Envoy alone with --envoy)"},
		{Name: "ca", Synopsis: "rotate prepare|activate|retire|status [--config FILE] [--from DIR] [--force]", Subs: []string{"rotate"}, Daemon: true, Run: caCmd, Summary: "rotate the CA's root without an outage: a new root trusted beside the old, then signing, then the old one retired"},
		{Name: "version", Synopsis: "[--short]", Daemon: true, Run: versionCmd,
			Summary: "this client's version and the daemon's (from /version)"},
		{Name: "completion", Synopsis: "bash|zsh", Subs: []string{"bash", "zsh"}, Run: completionCmd,
			Summary: "a shell completion script (source <(baremeshctl completion bash))"},
		{Name: "help", Synopsis: "[COMMAND]", Run: helpCmd, Summary: "this list, or one command's flags"},
	}
}

func lookup(name string) *Verb {
	for i := range Verbs {
		if Verbs[i].Name == name {
			return &Verbs[i]
		}
	}
	return nil
}

func onboardCmd(name string) func(*Env, []string) int {
	return func(e *Env, args []string) int {
		if len(args) == 0 || isHelp(args[0]) {
			// Asked for: every subcommand's flags and examples on stdout;
			// missing: the short usage on stderr.
			if helpCode(args) == 0 {
				onboard.Help(e.Stdout, name)
				return 0
			}
			fmt.Fprint(e.Stderr, "usage:\n", onboard.Usage)
			return 2
		}
		return onboard.Main(append([]string{name}, args...), e.Stdout, e.Stderr)
	}
}

func isHelp(a string) bool { return a == "-h" || a == "--help" || a == "-help" || a == "help" }

// helpCode is 0 when the user asked for help, 2 when arguments were missing.
func helpCode(args []string) int {
	if len(args) > 0 && isHelp(args[0]) {
		return 0
	}
	return 2
}

// Main runs baremeshctl with args (without the program name).
func Main(args []string, stdout, stderr io.Writer) int {
	e := &Env{Stdout: stdout, Stderr: stderr, Daemon: os.Getenv("BAREMESH_DAEMON"), Now: time.Now,
		HTTP: &http.Client{Timeout: 30 * time.Second}}
	if e.Daemon == "" {
		e.Daemon = DefaultDaemon
	}
	return e.Main(args)
}

// Main runs one command line with e's settings.
func (e *Env) Main(args []string) int {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") { // global flags before the verb
		switch a := args[0]; {
		case a == "--daemon" || a == "-daemon":
			if len(args) < 2 {
				fmt.Fprintln(e.Stderr, "baremeshctl: --daemon needs a URL")
				return 2
			}
			e.Daemon, args = args[1], args[2:]
		case strings.HasPrefix(a, "--daemon="):
			e.Daemon, args = strings.TrimPrefix(a, "--daemon="), args[1:]
		case a == "--version" || a == "-version":
			fmt.Fprintln(e.Stdout, "baremeshctl", version.Version)
			return 0
		case isHelp(a):
			e.usage(e.Stdout)
			return 0
		default:
			fmt.Fprintf(e.Stderr, "baremeshctl: unknown flag %s\n", a)
			e.usage(e.Stderr)
			return 2
		}
	}
	if len(args) == 0 {
		e.usage(e.Stderr)
		return 2
	}
	v := lookup(args[0])
	if v == nil {
		fmt.Fprintf(e.Stderr, "baremeshctl: unknown command %q; the commands are: %s\n", args[0], strings.Join(names(), ", "))
		return 2
	}
	return v.Run(e, args[1:])
}

func names() []string {
	var out []string
	for _, v := range Verbs {
		out = append(out, v.Name)
	}
	return out
}

// Usage writes the command list (what --help prints).
func Usage(w io.Writer) { (&Env{}).usage(w) }

func (e *Env) usage(w io.Writer) {
	fmt.Fprintf(w, "baremeshctl %s: the command-line tool of baremesh, as istioctl is for Istio.\n\n", version.Version)
	fmt.Fprintln(w, "usage: baremeshctl [--daemon URL] COMMAND [ARGS]")
	fmt.Fprintln(w, "\ncommands:")
	for _, v := range Verbs {
		fmt.Fprintf(w, "  %-13s %s\n", v.Name, v.Summary)
	}
	fmt.Fprintf(w, "\n--daemon URL (or $BAREMESH_DAEMON) is baremeshd's HTTP address, default %s.\n", DefaultDaemon)
	fmt.Fprintln(w, "baremeshctl help COMMAND shows a command's arguments and flags; --version prints the version.")
}

func helpCmd(e *Env, args []string) int {
	if len(args) == 0 || isHelp(args[0]) {
		e.usage(e.Stdout)
		return 0
	}
	v := lookup(args[0])
	if v == nil {
		fmt.Fprintf(e.Stderr, "baremeshctl: unknown command %q; the commands are: %s\n", args[0], strings.Join(names(), ", "))
		return 2
	}
	return v.Run(&Env{Stdout: e.Stdout, Stderr: e.Stdout, Daemon: e.Daemon, Now: e.Now, HTTP: e.HTTP}, []string{"--help"})
}

// newFlags makes a command's flag set; --daemon is on every daemon verb.
func (e *Env) newFlags(v string) *flag.FlagSet {
	fs := flag.NewFlagSet("baremeshctl "+v, flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	if verb := lookup(v); verb != nil {
		fs.Usage = func() {
			fmt.Fprintf(fs.Output(), "usage: baremeshctl %s %s\n  %s\n", verb.Name, verb.Synopsis, verb.Summary)
			fs.PrintDefaults()
		}
		if verb.Daemon {
			fs.StringVar(&e.Daemon, "daemon", e.Daemon, "baremeshd's HTTP address")
		}
	}
	return fs
}

// parse parses flags that may come before, between or after the
// positional arguments, and returns the positionals. A help request
// returns flag.ErrHelp after printing the usage.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// exitParse is the exit code of a flag error: 0 for --help, else 2.
func exitParse(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}
