package nstest

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const helperEnv = "NSTEST_HELPER"

// MaybeHelper turns the test binary into a client helper when it was
// started by RunAs; call it first thing in TestMain. Commands:
//
//	banner NETWORK ADDR         dial, print the server's first line
//	dns NETWORK SERVER NAME     resolve NAME, print the A record
//	dnsfrom SERVER NAME PORT    resolve NAME over UDP from local PORT
//	dnsforward LISTEN UPSTREAM [SUFFIX ANSWER]
//	                            run a UDP DNS forwarder (see runForwarder)
func MaybeHelper() {
	if os.Getenv(helperEnv) == "" {
		return
	}
	args := os.Args[1:]
	var out string
	var err error
	switch {
	case len(args) == 3 && args[0] == "banner":
		var c net.Conn
		if c, err = net.DialTimeout(args[1], args[2], 3*time.Second); err == nil {
			out, err = ReadLine(c)
			c.Close()
		}
	case len(args) == 4 && args[0] == "dns":
		var a interface{ String() string }
		a, err = Resolve(args[1], args[2], args[3])
		if err == nil {
			out = a.String()
		}
	case len(args) == 4 && args[0] == "dnsfrom":
		var port int
		if port, err = strconv.Atoi(args[3]); err == nil {
			var a interface{ String() string }
			if a, err = ResolveFrom(args[1], args[2], port); err == nil {
				out = a.String()
			}
		}
	case len(args) >= 1 && args[0] == "dnsforward":
		err = runForwarder(args[1:])
	default:
		err = fmt.Errorf("unknown helper command %q", args)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(out)
	os.Exit(0)
}

var (
	helperOnce sync.Once
	helperDir  string
	helperPath string
	helperErr  error
)

// HelperBinary returns a copy of the test binary that any user can run.
func HelperBinary() (string, error) { return helperBinary() }

// helperBinary copies the test binary to a directory other users can read,
// since the go build cache directory is private to root.
func helperBinary() (string, error) {
	helperOnce.Do(func() {
		helperDir, helperErr = os.MkdirTemp("", "nstest-helper-")
		if helperErr != nil {
			return
		}
		if helperErr = os.Chmod(helperDir, 0o755); helperErr != nil {
			return
		}
		src, err := os.Open(os.Args[0])
		if err != nil {
			helperErr = err
			return
		}
		defer src.Close()
		helperPath = filepath.Join(helperDir, "helper")
		dst, err := os.OpenFile(helperPath, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			helperErr = err
			return
		}
		_, helperErr = io.Copy(dst, src)
		if cerr := dst.Close(); helperErr == nil {
			helperErr = cerr
		}
	})
	return helperPath, helperErr
}

// Cleanup removes the helper copy; call it at the end of TestMain.
func Cleanup() {
	if helperDir != "" {
		os.RemoveAll(helperDir)
	}
}

// RunAs runs a helper command (see MaybeHelper) inside the namespace as
// uid and gid, in a child process, and returns its trimmed output.
func (n *NS) RunAs(t testing.TB, uid, gid int, args ...string) (string, error) {
	t.Helper()
	bin, err := helperBinary()
	if err != nil {
		t.Fatalf("helper binary: %v", err)
	}
	cmdArgs := append([]string{"netns", "exec", n.Name, "setpriv",
		fmt.Sprintf("--reuid=%d", uid), fmt.Sprintf("--regid=%d", gid), "--clear-groups", bin}, args...)
	cmd := exec.Command("ip", cmdArgs...)
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return "", fmt.Errorf("helper %v as uid %d: %w: %s", args, uid, err, ee.Stderr)
		}
		return "", fmt.Errorf("helper %v as uid %d: %w", args, uid, err)
	}
	return strings.TrimSpace(string(out)), nil
}
