package ctl

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/internal/analyze"
	"github.com/baremesh/baremesh/internal/validate"
	"github.com/baremesh/baremesh/sources/file"
)

// ExitAnalyzeIssues is analyze's exit code when a message reaches the
// failure threshold, as istioctl analyze's (79).
const ExitAnalyzeIssues = 79

func analyzeCmd(e *Env, args []string) int {
	fs := e.newFlags("analyze")
	useDaemon := fs.Bool("use-daemon", false, "analyze the config a running baremeshd holds (--daemon URL) instead of files")
	daemonFlag := fs.String("daemon", "", "analyze the config the baremeshd at this URL holds (its /debug/configz)")
	threshold := fs.String("failure-threshold", "error", "the lowest level that makes the exit code 79: info, warning or error")
	minLevel := fs.String("output-threshold", "info", "the lowest level printed: info, warning or error")
	pos, err := parse(fs, args)
	if err != nil {
		return exitParse(err)
	}
	fail, err1 := analyze.ParseLevel(*threshold)
	show, err2 := analyze.ParseLevel(*minLevel)
	if err1 != nil || err2 != nil {
		fmt.Fprintln(e.Stderr, "baremeshctl analyze:", firstErr(err1, err2))
		return 2
	}
	if *daemonFlag != "" {
		e.Daemon, *useDaemon = *daemonFlag, true
	}
	if (len(pos) == 0) != *useDaemon {
		fs.Usage()
		return 2
	}
	var cfgs []config.Config
	what := ""
	if *useDaemon {
		if cfgs, err = e.daemonConfigs(); err != nil {
			return e.fail(err)
		}
		what = "baremeshd at " + e.Daemon
	} else {
		var bad int
		if cfgs, bad, err = loadDirs(pos, e); err != nil {
			fmt.Fprintln(e.Stderr, "baremeshctl:", err)
			return 2
		}
		if bad > 0 {
			fmt.Fprintf(e.Stderr, "baremeshctl analyze: %d resources could not be read (baremeshctl validate shows why); analyzing the rest\n", bad)
		}
		what = strings.Join(pos, ", ")
	}
	code, shown := 0, 0
	for _, m := range analyze.Analyze(cfgs) {
		if m.Code.Level >= fail {
			code = ExitAnalyzeIssues
		}
		if m.Code.Level >= show {
			fmt.Fprintln(e.Stdout, m.String())
			shown++
		}
	}
	if shown == 0 {
		fmt.Fprintf(e.Stdout, "✔ No validation issues found when analyzing %s.\n", what)
	}
	return code
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// loadDirs reads config files with the file source's parser. Resources
// that fail to parse are counted (validate reports them) and left out.
func loadDirs(paths []string, e *Env) ([]config.Config, int, error) {
	files, err := validate.Files(paths)
	if err != nil {
		return nil, 0, err
	}
	var out []config.Config
	bad := 0
	for _, f := range files {
		data, err := validate.ReadFile(f)
		if err != nil {
			return nil, 0, err
		}
		cfgs, errs := file.Parse(data, f, "analyze")
		bad += len(errs)
		out = append(out, cfgs...)
	}
	return out, bad, nil
}

// daemonConfigs reads the resources a daemon holds from /debug/configz.
func (e *Env) daemonConfigs() ([]config.Config, error) {
	var cz struct {
		Resources []struct {
			Kind        string            `json:"kind"`
			APIVersion  string            `json:"apiVersion"`
			Namespace   string            `json:"namespace"`
			Name        string            `json:"name"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
			Source      config.Source     `json:"source"`
			Spec        json.RawMessage   `json:"spec"`
		} `json:"resources"`
	}
	// all=1: every resource in one streamed answer (the page is bounded).
	if _, err := e.get("/debug/configz", url.Values{"all": {"1"}}, &cz); err != nil {
		return nil, err
	}
	var out []config.Config
	for _, r := range cz.Resources {
		var spec map[string]any
		if err := json.Unmarshal(r.Spec, &spec); err != nil {
			return nil, fmt.Errorf("configz: %s %s/%s: %w", r.Kind, r.Namespace, r.Name, err)
		}
		md := map[string]any{"name": r.Name, "namespace": r.Namespace}
		if len(r.Labels) > 0 {
			md["labels"] = r.Labels
		}
		c, err := config.Typed(map[string]any{"apiVersion": r.APIVersion, "kind": r.Kind, "metadata": md, "spec": spec}, r.Source)
		if err != nil {
			return nil, fmt.Errorf("configz: %s %s/%s: %w", r.Kind, r.Namespace, r.Name, err)
		}
		out = append(out, c)
	}
	return out, nil
}
