package file_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/store"
	"github.com/baremesh/baremesh/sources/file"
)

// The measurements of issue #11 item 5, run by hand (they are slow):
//
//	BAREMESH_SCALE_FILES=100000 nice go test -run TestScaleManyFiles -v ./sources/file
//	BAREMESH_SCALE_LIST=1000000 nice go test -run TestScaleBigList -v ./sources/file

// TestScaleManyFiles: time from Run to Synced over N one-resource files.
func TestScaleManyFiles(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("BAREMESH_SCALE_FILES"))
	if n == 0 {
		t.Skip("set BAREMESH_SCALE_FILES=N")
	}
	dir := t.TempDir()
	for i := 0; i < n; i++ {
		body := fmt.Sprintf("apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: s%d, namespace: ns%d}\nspec:\n  hosts: [s%d.ns%d.mesh]\n  addresses: [10.%d.%d.%d]\n  ports: [{number: 80, name: http, protocol: HTTP}]\n  resolution: DNS\n",
			i, i%10, i, i%10, i>>16&255, i>>8&255, i&255)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%06d.yaml", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	agg := store.NewAggregate()
	w := file.New(file.Options{Dirs: []string{dir}}, agg.AddSource("file"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	go func() { _ = w.Run(ctx) }()
	wctx, wcancel := context.WithTimeout(ctx, 240*time.Second)
	defer wcancel()
	if err := agg.WaitSynced(wctx); err != nil {
		t.Fatalf("%d files: not synced after %v", n, time.Since(start))
	}
	took := time.Since(start)
	if got := len(agg.List(config.ServiceEntry, "")); got != n {
		t.Fatalf("resources = %d, want %d", got, n)
	}
	t.Logf("%d one-resource files: synced in %v (GOMAXPROCS %d)", n, took, runtime.GOMAXPROCS(0))
}

// TestScaleBigList: the cost of one file holding an N-element list.
func TestScaleBigList(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("BAREMESH_SCALE_LIST"))
	if n == 0 {
		t.Skip("set BAREMESH_SCALE_LIST=N")
	}
	data := []byte("apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: a}\nspec:\n  hosts: [" + strings.Repeat("a,", n) + "a]\n  resolution: NONE\n")
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	cfgs, errs := file.Parse(data, "big.yaml", "file")
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	msg := "accepted"
	if len(errs) > 0 {
		msg = errs[0].Error()
	}
	t.Logf("%d-element list, %d bytes: %v, %d MB allocated, %d configs: %s", n, len(data), took, (after.TotalAlloc-before.TotalAlloc)>>20, len(cfgs), msg)
}
