// Command baremeshd is the baremesh control plane daemon.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/baremesh/baremesh/internal/daemon"
	"github.com/baremesh/baremesh/internal/version"
)

func main() {
	cfg, path, err := daemon.Load(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "baremeshd:", err)
		os.Exit(2)
	}
	level, _ := daemon.ParseLevel(cfg.LogLevel)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	log.Info("baremeshd starting", "version", version.Version, "config", path)
	d, err := daemon.New(cfg, log)
	if err != nil {
		log.Error("cannot start", "err", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := d.Run(ctx); err != nil {
		log.Error("stopped with error", "err", err)
		os.Exit(1)
	}
}
