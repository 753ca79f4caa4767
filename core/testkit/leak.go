package testkit

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// benign are goroutines the runtime, the testing package or net/http's
// idle connections own.
var benign = []string{
	"testing.Main(", "testing.(*M).", "testing.tRunner(",
	"created by os/signal.Notify", "signal.loop", "runtime.ensureSigM",
	"net/http.(*persistConn)",
	// grpc-go 1.85's xDS bootstrap "tls" channel creds: one certificate
	// file watcher per xDS client is still running after the client and
	// its ClientConn are closed (seen in internal/e2e's TLS xDS tests).
	"certprovider/pemfile.(*watcher).run",
}

// Leaked returns the stacks of goroutines other than the caller's and
// benign ones, polling until deadline for stragglers to exit.
func Leaked(wait time.Duration) []string {
	deadline := time.Now().Add(wait)
	for {
		var leaked []string
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for i, g := range strings.Split(string(buf), "\n\n") {
			if i == 0 || isBenign(g) { // the first is our own goroutine
				continue
			}
			leaked = append(leaked, g)
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}

func isBenign(stack string) bool {
	for _, b := range benign {
		if strings.Contains(stack, b) {
			return true
		}
	}
	return false
}

// Main runs the tests, then fails the binary if goroutines leaked: the
// body of every TestMain of a package whose code starts goroutines,
//
//	func TestMain(m *testing.M) { testkit.Main(m.Run) }
func Main(run func() int) {
	code := run()
	if code == 0 {
		if leaked := Leaked(5 * time.Second); len(leaked) > 0 {
			fmt.Fprintf(os.Stderr, "leakcheck: %d goroutine(s) leaked:\n%s\n", len(leaked), strings.Join(leaked, "\n\n"))
			code = 1
		}
	}
	os.Exit(code)
}
