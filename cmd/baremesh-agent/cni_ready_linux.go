package main

import (
	"context"
	"encoding/base64"
	"net"
	"os"
	"time"

	"github.com/baremesh/baremesh/nodeagent/cni/install"
)

// reportReady keeps path present exactly while the plugin is chained.
func reportReady(ctx context.Context, in *install.Installer, path string) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	defer os.Remove(path)
	for {
		if in.Ready() {
			_ = os.WriteFile(path, []byte("ready\n"), 0o644)
		} else {
			_ = os.Remove(path)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func joinHostPort(host, port string) string {
	if port == "" {
		port = "443"
	}
	return net.JoinHostPort(host, port)
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
