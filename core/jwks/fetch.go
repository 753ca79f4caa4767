package jwks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options configure a Fetcher. Zero values take the defaults.
type Options struct {
	// Refresh is how often a good key set is fetched again (istiod's
	// PILOT_JWT_PUB_KEY_REFRESH_INTERVAL, default 20 min).
	Refresh time.Duration
	// RetryOnFailure is the wait after a failed fetch, doubled on each
	// further failure up to Refresh (default 1 min, as istiod's).
	RetryOnFailure time.Duration
	// Timeout bounds one fetch, connection to last byte (default 5 s,
	// istiod's default jwtRule timeout).
	Timeout time.Duration
	// MaxSize is the largest key set (or discovery document) read, in
	// bytes (default 1 MiB); a larger body is a failed fetch.
	MaxSize int64
	// Client makes the requests (default: one that refuses link-local
	// addresses, where cloud metadata services live, as istiod's does).
	Client *http.Client
	Logger *slog.Logger
	// OnChange receives each new set whose keys or errors differ from
	// the previous one's. Called from the Fetcher's goroutine.
	OnChange func(*Set)
}

// Fetcher keeps the key sets of the wanted sources. Want and Current
// are safe from any goroutine; Run is the one goroutine that fetches.
type Fetcher struct {
	opts Options

	mu      sync.Mutex
	wanted  map[Source]bool
	entries map[Source]Entry
	next    map[Source]time.Time // when to fetch next
	backoff map[Source]time.Duration
	timeout map[Source]time.Duration // per-source fetch timeouts (jwtRule.timeout)
	set     *Set
	kick    chan struct{}
}

// New returns a Fetcher; call Run to start it.
func New(opts Options) *Fetcher {
	if opts.Refresh <= 0 {
		opts.Refresh = 20 * time.Minute
	}
	if opts.RetryOnFailure <= 0 {
		opts.RetryOnFailure = time.Minute
	}
	if opts.RetryOnFailure > opts.Refresh {
		opts.RetryOnFailure = opts.Refresh
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.MaxSize <= 0 {
		opts.MaxSize = 1 << 20
	}
	if opts.Client == nil {
		opts.Client = DefaultClient()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Fetcher{opts: opts, wanted: map[Source]bool{}, entries: map[Source]Entry{}, next: map[Source]time.Time{},
		backoff: map[Source]time.Duration{}, set: NewSet(map[Source]Entry{}), kick: make(chan struct{}, 1)}
}

// DefaultClient refuses connections to link-local addresses (cloud
// metadata services), as istiod's resolver does; proxies from the
// environment apply.
func DefaultClient() *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		if ip := net.ParseIP(host); ip != nil && (ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast()) {
			return fmt.Errorf("connection to %s refused: a link-local address (cloud metadata services live there)", host)
		}
		return nil
	}}
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, DialContext: d.DialContext, DisableKeepAlives: true}}
}

// Want sets the sources to keep: new ones are fetched at once, the
// others forgotten (their keys leave the next set).
func (f *Fetcher) Want(srcs []Source) {
	f.mu.Lock()
	changed := false
	want := make(map[Source]bool, len(srcs))
	for _, s := range srcs {
		want[s] = true
		if !f.wanted[s] {
			f.next[s] = time.Time{} // due now
			changed = true
		}
	}
	for s := range f.wanted {
		if !want[s] {
			delete(f.entries, s)
			delete(f.next, s)
			delete(f.backoff, s)
		}
	}
	f.wanted = want
	f.mu.Unlock()
	if changed {
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
}

// SetTimeouts sets per-source fetch timeouts (TimeoutsOf); a source
// without one uses Options.Timeout.
func (f *Fetcher) SetTimeouts(t map[Source]time.Duration) {
	f.mu.Lock()
	f.timeout = t
	f.mu.Unlock()
}

// Current returns the latest set.
func (f *Fetcher) Current() *Set {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.set
}

// Run fetches what is due until ctx ends.
func (f *Fetcher) Run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		f.fetchDue(ctx)
		wait := f.untilNext()
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-f.kick:
		case <-timer.C:
		}
	}
}

func (f *Fetcher) untilNext() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	wait := time.Hour
	now := time.Now()
	for s := range f.wanted {
		if d := f.next[s].Sub(now); d < wait {
			wait = d
		}
	}
	return max(wait, 0)
}

// fetchDue fetches the due sources concurrently, then publishes the set
// if it changed.
func (f *Fetcher) fetchDue(ctx context.Context) {
	f.mu.Lock()
	now := time.Now()
	var due []Source
	for s := range f.wanted {
		if !f.next[s].After(now) {
			due = append(due, s)
		}
	}
	f.mu.Unlock()
	if len(due) == 0 {
		return
	}
	type result struct {
		src  Source
		keys string
		err  error
	}
	results := make([]result, len(due))
	var wg sync.WaitGroup
	for i, s := range due {
		wg.Add(1)
		f.mu.Lock()
		timeout := f.timeout[s]
		f.mu.Unlock()
		if timeout <= 0 {
			timeout = f.opts.Timeout
		}
		go func() {
			defer wg.Done()
			keys, err := f.fetch(ctx, s, timeout)
			results[i] = result{src: s, keys: keys, err: err}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	f.mu.Lock()
	now = time.Now()
	for _, r := range results {
		if !f.wanted[r.src] {
			continue // forgotten while fetching
		}
		e := f.entries[r.src]
		if r.err != nil {
			if e.Err == nil {
				e.Since = now
				f.opts.Logger.Warn("jwks: fetch failed; keeping the last good keys", "source", r.src.String(), "err", r.err, "haveKeys", e.Keys != "")
			}
			e.Err = r.err
			b := f.backoff[r.src]
			if b == 0 {
				b = f.opts.RetryOnFailure
			} else {
				b = min(2*b, f.opts.Refresh)
			}
			f.backoff[r.src] = b
			f.next[r.src] = now.Add(b)
		} else {
			if e.Keys != r.keys {
				f.opts.Logger.Info("jwks: keys changed", "source", r.src.String())
			}
			e = Entry{Keys: r.keys, Fetched: now}
			delete(f.backoff, r.src)
			f.next[r.src] = now.Add(f.opts.Refresh)
		}
		f.entries[r.src] = e
	}
	set := NewSet(maps.Clone(f.entries))
	changed := !set.Equal(f.set)
	f.set = set
	f.mu.Unlock()
	if changed && f.opts.OnChange != nil {
		f.opts.OnChange(set)
	}
}

// fetch gets src's key set: its URI, or the jwks_uri its issuer's
// discovery document names.
func (f *Fetcher) fetch(ctx context.Context, src Source, timeout time.Duration) (string, error) {
	uri := src.URI
	if uri == "" {
		doc := strings.TrimSuffix(src.Issuer, "/") + "/.well-known/openid-configuration"
		body, err := f.get(ctx, doc, timeout)
		if err != nil {
			return "", fmt.Errorf("openid discovery %s: %w", doc, err)
		}
		var d struct {
			JWKSURI string `json:"jwks_uri"`
		}
		if err := json.Unmarshal(body, &d); err != nil || d.JWKSURI == "" {
			return "", fmt.Errorf("openid discovery %s: no jwks_uri in the document", doc)
		}
		uri = d.JWKSURI
	}
	body, err := f.get(ctx, uri, timeout)
	if err != nil {
		return "", fmt.Errorf("jwksUri %s: %w", uri, err)
	}
	if err := Check(body); err != nil {
		return "", fmt.Errorf("jwksUri %s: %w", uri, err)
	}
	return string(body), nil
}

// ErrTooLarge is the error of a body over Options.MaxSize.
var ErrTooLarge = errors.New("body too large")

func (f *Fetcher) get(ctx context.Context, uri string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, fmt.Errorf("bad URI: %w", err)
	}
	resp, err := f.opts.Client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("timed out after %v: %w", timeout, err)
		}
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.opts.MaxSize+1))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return nil, fmt.Errorf("timed out after %v reading the body: %w", timeout, err)
		}
		return nil, fmt.Errorf("reading the body: %w", err)
	}
	if int64(len(body)) > f.opts.MaxSize {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, f.opts.MaxSize)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := string(body)
		if len(msg) > 100 {
			msg = msg[:100] + "…"
		}
		return nil, fmt.Errorf("status %d: %q", resp.StatusCode, msg)
	}
	return body, nil
}
