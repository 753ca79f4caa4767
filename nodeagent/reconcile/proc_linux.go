package reconcile

import "syscall"

// procAttr puts the proxy in its own process group (so stop reaches its
// children) and has the kernel send it SIGTERM if the agent dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
