package ctl

import (
	"fmt"

	"github.com/baremesh/baremesh/internal/version"
)

func versionCmd(e *Env, args []string) int {
	fs := e.newFlags("version")
	short := fs.Bool("short", false, "print only the client's version, do not ask the daemon")
	if _, err := parse(fs, args); err != nil {
		return exitParse(err)
	}
	fmt.Fprintf(e.Stdout, "client version: %s\n", version.Version)
	if *short {
		return 0
	}
	var v struct {
		Version string `json:"version"`
	}
	if _, err := e.get("/version", nil, &v); err != nil {
		return e.fail(err)
	}
	fmt.Fprintf(e.Stdout, "baremeshd version: %s (%s)\n", v.Version, e.Daemon)
	return 0
}
