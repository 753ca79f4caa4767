package kube_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/core/testkit"
	"github.com/baremesh/baremesh/sources/kube"
)

// TestMissingClustersDirIsReported (issue #25): a kubeconfig directory
// that does not exist is waited for, but reported as a problem on it
// (what /debug/configz lists) and logged, until it appears; before, it
// was waited for without a word. No cluster is needed: no file names one.
func TestMissingClustersDirIsReported(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "clusters")
	agg := store.NewAggregate()
	var mu lockedBuffer
	src, err := kube.New(kube.Options{Dir: dir, Model: func(model.KubeUpdate) {}, Rescan: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&mu, nil))}, agg.AddSource("kube"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = src.Run(ctx) }()
	defer func() { cancel(); <-done }()
	problem := func() string {
		for _, p := range agg.Problems() {
			if p.Origin == dir {
				return p.Error
			}
		}
		return ""
	}
	testkit.Eventually(t, "a problem on the missing directory", func() bool { return strings.Contains(problem(), "does not exist") })
	if !strings.Contains(mu.String(), "kubeconfig directory does not exist") {
		t.Fatalf("not logged: %s", mu.String())
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the problem cleared once the directory exists", func() bool { return problem() == "" })
}

// lockedBuffer is a log sink safe for the source's goroutine and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
