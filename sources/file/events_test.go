package file_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baremesh/baremesh/sources/file"
)

func seWithPort(name, port string) string {
	return strings.Replace(strings.Replace(good, "name: a", "name: "+name, 1), "80", port, 1)
}

func TestRenameAndReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	write(t, path, good)
	r := run(t, file.Options{Dirs: []string{dir}, Coalesce: 10e6})
	// vim-style: write a hidden temp file, rename it over the original.
	tmp := filepath.Join(dir, ".a.yaml.swp")
	write(t, tmp, seWithPort("a", "81"))
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	poll(t, "port 81 after rename", func() bool { return r.port("a") == 81 })
	// A backup file "a.yaml~" is ignored.
	write(t, path+"~", seWithPort("backup", "82"))
	write(t, filepath.Join(dir, "z.yaml"), seWithPort("z", "83"))
	poll(t, "z", func() bool { return r.port("z") == 83 })
	if r.port("backup") != 0 {
		t.Fatal("editor backup file was read")
	}
}

// TestConfigMapSymlinkSwap follows the layout Kubernetes uses for mounted
// ConfigMaps: files are symlinks into ..data, itself a symlink to a
// timestamped directory that is swapped atomically.
func TestConfigMapSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	mk := func(ts, port string) {
		d := filepath.Join(dir, "..2026_"+ts)
		write(t, filepath.Join(d, "a.yaml"), seWithPort("a", port))
	}
	mk("1", "80")
	if err := os.Symlink("..2026_1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/a.yaml", filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	r := run(t, file.Options{Dirs: []string{dir}})
	if r.port("a") != 80 {
		t.Fatalf("initial port = %d", r.port("a"))
	}
	mk("2", "90")
	if err := os.Symlink("..2026_2", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "..2026_1")); err != nil {
		t.Fatal(err)
	}
	poll(t, "port 90 after the ..data swap", func() bool { return r.port("a") == 90 })
}

func TestRecursiveAndDirectoryLifecycle(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "top.yaml"), seWithPort("top", "80"))
	r := run(t, file.Options{Dirs: []string{root}, Coalesce: 20e6})
	// A new subdirectory with a file in it is picked up.
	sub := filepath.Join(root, "team", "svc")
	write(t, filepath.Join(sub, "b.yaml"), seWithPort("b", "81"))
	poll(t, "file in new subdirectory", func() bool { return r.port("b") == 81 })
	// Removing a subdirectory deletes what its files held.
	if err := os.RemoveAll(filepath.Join(root, "team")); err != nil {
		t.Fatal(err)
	}
	poll(t, "subdirectory resources gone", func() bool { return r.port("b") == 0 })
	// Removing the watched root keeps its resources (a redeploy may put it
	// back) and reports it; re-creating it re-syncs.
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	poll(t, "root removal reported", func() bool { return strings.Contains(r.problemFor(root), "directory removed") })
	if r.port("top") != 80 {
		t.Fatal("root removal dropped its resources")
	}
	write(t, filepath.Join(root, "new.yaml"), seWithPort("new", "82"))
	poll(t, "re-created root re-synced", func() bool { return r.port("new") == 82 && r.port("top") == 0 })
	poll(t, "problem cleared", func() bool { return r.problemFor(root) == "" })
}
