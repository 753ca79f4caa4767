package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Options configure an Installer.
type Options struct {
	// BinDir is the node's CNI bin dir (default /opt/cni/bin).
	BinDir string
	// ConfDir is the node's CNI config dir (default /etc/cni/net.d).
	ConfDir string
	// ConfName picks the file to chain into; empty chooses as istio-cni.
	ConfName string
	// Binaries are copied into BinDir under their base names.
	Binaries []string
	// Kubeconfig is the content of the plugin's kubeconfig, written to
	// ConfDir/baremesh-cni.kubeconfig (mode 0600).
	Kubeconfig []byte
	// Plugin is our conflist entry; "type" and "kubernetes.kubeconfig"
	// are filled in.
	Plugin map[string]any
	// ReadyFile, if set, is present exactly while Run runs with the
	// plugin chained (for a readiness probe); Run removes it on return.
	ReadyFile string
}

// KubeconfigName is the plugin's kubeconfig file in the config dir.
const KubeconfigName = "baremesh-cni.kubeconfig"

// Installer installs the plugin and keeps it installed. Ready is safe for
// concurrent use; Install, Run and Uninstall are not meant to overlap.
type Installer struct {
	log   *slog.Logger
	opts  Options
	ready atomic.Bool
	conf  atomic.Value // string: the file we chained into
}

// New returns an Installer with defaults applied.
func New(log *slog.Logger, opts Options) *Installer {
	if opts.BinDir == "" {
		opts.BinDir = "/opt/cni/bin"
	}
	if opts.ConfDir == "" {
		opts.ConfDir = "/etc/cni/net.d"
	}
	return &Installer{log: log, opts: opts}
}

// Ready reports whether our plugin is in the node's CNI configuration.
func (in *Installer) Ready() bool { return in.ready.Load() }

// ConfFile is the configuration file we last chained into.
func (in *Installer) ConfFile() string { s, _ := in.conf.Load().(string); return s }

// Install copies the binaries, writes the kubeconfig and inserts the
// plugin. It returns an error wrapping ErrNoConfig while the main CNI has
// written no configuration.
func (in *Installer) Install() error {
	for _, b := range in.opts.Binaries {
		if err := copyFile(b, filepath.Join(in.opts.BinDir, filepath.Base(b)), 0o755); err != nil {
			return fmt.Errorf("installing binary %s: %w", b, err)
		}
	}
	kc := filepath.Join(in.opts.ConfDir, KubeconfigName)
	if in.opts.Kubeconfig != nil {
		if err := writeAtomic(kc, in.opts.Kubeconfig, 0o600); err != nil {
			return fmt.Errorf("writing kubeconfig: %w", err)
		}
	}
	return in.insert(kc)
}

func (in *Installer) plugin(kubeconfig string) map[string]any {
	p := map[string]any{}
	for k, v := range in.opts.Plugin {
		p[k] = v
	}
	p["type"] = PluginType
	k8s, _ := p["kubernetes"].(map[string]any)
	nk := map[string]any{}
	for k, v := range k8s {
		nk[k] = v
	}
	nk["kubeconfig"] = kubeconfig
	p["kubernetes"] = nk
	return p
}

func (in *Installer) insert(kubeconfig string) error {
	src, err := ChooseFile(in.opts.ConfDir, in.opts.ConfName)
	if err != nil {
		in.ready.Store(false)
		return err
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("reading %s: %w", src, err)
	}
	out, changed, err := Insert(data, in.plugin(kubeconfig))
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	dst := listPath(src)
	if changed || dst != src {
		if err := writeAtomic(dst, out, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", dst, err)
		}
		if dst != src {
			if err := os.Remove(src); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("removing %s after converting it to %s: %w", src, dst, err)
			}
		}
		in.log.Info("baremesh-cni chained into CNI configuration", "file", dst)
	}
	in.conf.Store(dst)
	in.ready.Store(true)
	return nil
}

// Run installs, then watches the config dir and re-inserts the plugin
// whenever the main CNI rewrites its configuration, until ctx ends.
func (in *Installer) Run(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", in.opts.ConfDir, err)
	}
	defer w.Close()
	if err := w.Add(in.opts.ConfDir); err != nil {
		return fmt.Errorf("watching %s: %w", in.opts.ConfDir, err)
	}
	if err := in.Install(); err != nil && !errors.Is(err, ErrNoConfig) {
		return err
	} else if err != nil {
		in.log.Warn("waiting for the main CNI configuration", "dir", in.opts.ConfDir)
	}
	if in.opts.ReadyFile != "" {
		readyCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); in.keepReadyFile(readyCtx, in.opts.ReadyFile) }()
		defer func() { stop(); <-done }()
	}
	kc := filepath.Join(in.opts.ConfDir, KubeconfigName)
	// Coalesce bursts of events (write, chmod, rename) into one check.
	var settle <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-w.Errors:
			in.log.Warn("watch error", "err", err)
		case ev := <-w.Events:
			if filepath.Base(ev.Name) == KubeconfigName || filepath.Base(ev.Name)[0] == '.' {
				continue
			}
			settle = time.After(50 * time.Millisecond) // debounce, not synchronisation
		case <-settle:
			settle = nil
			if err := in.insert(kc); err != nil {
				in.log.Warn("re-inserting baremesh-cni", "err", err)
			}
		}
	}
}

// Uninstall removes our plugin from the configuration it is in, our
// kubeconfig and our binaries. Missing pieces are not errors.
func (in *Installer) Uninstall() error {
	in.ready.Store(false)
	var errs []error
	entries, err := os.ReadDir(in.opts.ConfDir)
	if err != nil {
		errs = append(errs, fmt.Errorf("reading %s: %w", in.opts.ConfDir, err))
	}
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || (ext != ".conf" && ext != ".conflist" && ext != ".json") {
			continue
		}
		p := filepath.Join(in.opts.ConfDir, e.Name())
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		out, changed, err := Remove(data)
		if err != nil || !changed {
			continue
		}
		if err := writeAtomic(p, out, 0o644); err != nil {
			errs = append(errs, fmt.Errorf("removing baremesh-cni from %s: %w", p, err))
		}
	}
	for _, p := range append([]string{filepath.Join(in.opts.ConfDir, KubeconfigName)}, in.binaryPaths()...) {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

func (in *Installer) binaryPaths() []string {
	var out []string
	for _, b := range in.opts.Binaries {
		out = append(out, filepath.Join(in.opts.BinDir, filepath.Base(b)))
	}
	return out
}

// writeAtomic writes data to a hidden temporary file and renames it, so a
// runtime reading the dir never sees half a file.
func writeAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	f, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := io.Copy(f, in); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), dst)
}
