package install

import (
	"context"
	"os"
	"time"
)

// keepReadyFile keeps path present exactly while the plugin is chained,
// checking every second, until ctx ends; then it removes it.
func (in *Installer) keepReadyFile(ctx context.Context, path string) {
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
