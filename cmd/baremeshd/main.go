// Command baremeshd is the baremesh control plane daemon.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/baremesh/baremesh/internal/daemon"
	"github.com/baremesh/baremesh/internal/daemonconfig"
	"github.com/baremesh/baremesh/internal/version"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "version", "--version", "-version":
			fmt.Println("baremeshd", version.Version)
			return
		case "help":
			_, _, _ = daemonconfig.Load([]string{"-h"}) // prints the usage
			return
		}
	}
	if len(os.Args) > 1 && os.Args[1] == "check-config" { // baremeshd check-config [flags]: exit 2 if it cannot start
		_, path, err := daemon.CheckConfig(os.Args[2:])
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "baremeshd:", err)
			os.Exit(2)
		}
		fmt.Println("baremeshd: config ok:", path)
		return
	}
	hup := make(chan os.Signal, 1) // SIGHUP reloads; registered before anything can be slow
	signal.Notify(hup, syscall.SIGHUP)
	cfg, path, err := daemonconfig.Load(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return // --help printed the usage
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "baremeshd:", err)
		os.Exit(2)
	}
	level := new(slog.LevelVar) // changed by reloads
	lv, _ := daemonconfig.ParseLevel(cfg.LogLevel)
	level.Set(lv)
	log := slog.New(slog.NewTextHandler(os.Stderr, daemon.LogHandlerOptions(level)))
	log.Info("baremeshd starting", "version", version.Version, "config", path)
	if cfg.MemoryLimitMB > 0 {
		debug.SetMemoryLimit(cfg.MemoryLimitMB << 20)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(cfg.GCPercent)
	}
	d, err := daemon.New(cfg, log)
	if err != nil {
		log.Error("cannot start", "err", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if !cfg.KeepStartupPages {
		go func() {
			select {
			case <-d.Pipeline().Ready(): // initialisation is over
				d.ReleaseStartupPages()
			case <-ctx.Done():
			}
		}()
	}
	sd := daemon.NewSystemd(d, cfg, log, daemon.SystemdOptions{Args: os.Args[1:], Level: level, Reload: hup})
	sdDone := make(chan struct{})
	go func() { defer close(sdDone); sd.Run(ctx) }()
	err = d.Run(ctx)
	<-sdDone
	if err != nil {
		log.Error("stopped with error", "err", err)
		os.Exit(1)
	}
}
