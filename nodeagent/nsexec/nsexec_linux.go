// Package nsexec runs code inside another network namespace: on a
// locked OS thread switched into the namespace and back. Processes
// started by that code (iptables-restore) fork from the thread and so
// run inside the namespace too. It is the one place the node agent
// switches namespaces (CNI plugin, node tunnel, tests).
//
// It imports nothing of baremesh.
package nsexec

import (
	"fmt"
	"path/filepath"
	"runtime"

	"github.com/vishvananda/netns"
)

// Path returns the path of a named namespace made with `ip netns add`.
func Path(name string) string { return filepath.Join("/var/run/netns", name) }

// Do runs fn in the namespace at path, on its own goroutine whose thread
// is locked for the duration. If switching back fails, the thread stays
// locked and the runtime discards it when the goroutine ends, so no other
// goroutine ever runs in the wrong namespace.
func Do(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("current netns: %w", err)
			return
		}
		defer orig.Close()
		target, err := netns.GetFromPath(path)
		if err != nil {
			errc <- fmt.Errorf("netns %s: %w", path, err)
			return
		}
		defer target.Close()
		if err := netns.Set(target); err != nil {
			errc <- fmt.Errorf("entering netns %s: %w", path, err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- fmt.Errorf("leaving netns %s: %w", path, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}
