package ctl

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// The daemon's debug API, as baremeshctl reads it. These mirror the JSON
// that baremeshd serves (xdsserver's debug handlers, internal/daemon's
// /version and /debug/configz); they are declared here so that the CLI
// depends on the wire format only.
//
//	GET /version                      {"version": "x.y.z"}
//	GET /debug/syncz                  [proxyStatus]: every xDS connection
//	GET /debug/config_dump?proxy=ID   [{"connection", "types": {"cds": [resource JSON]}}]
//	GET /debug/configz                {"resources": [...], "rejected": [...], ...}
//	POST /debug/diff?proxy=ID         {"files": [{"path", "content"}]} -> {"proxies": [{"id", "types": [{"type", "added", "removed", "changed"}]}]}

type syncStatus struct {
	Type        string    `json:"type"`
	Names       int       `json:"subscribedNames"`
	Wildcard    bool      `json:"wildcard"`
	SentVersion string    `json:"sentVersion,omitempty"`
	SentNonce   string    `json:"sentNonce,omitempty"`
	SentAt      time.Time `json:"sentAt"`
	Resources   int       `json:"resources"`
	AckedVer    string    `json:"ackedVersion,omitempty"`
	AckedAt     time.Time `json:"ackedAt"`
	LastNack    *struct {
		Nonce   string    `json:"nonce"`
		Version string    `json:"version"`
		Message string    `json:"message"`
		At      time.Time `json:"at"`
	} `json:"lastNack,omitempty"`
	GenError string `json:"generationError,omitempty"`
	Requests int    `json:"requests"`
	Acks     int    `json:"acks"`
	Nacks    int    `json:"nacks"`
}

type proxyStatusJSON struct {
	ID        string       `json:"id"`
	Conn      string       `json:"connection"`
	Peer      string       `json:"peer"`
	Type      string       `json:"type"`
	Proxyless bool         `json:"proxyless"`
	Namespace string       `json:"namespace"`
	IPs       []string     `json:"ips"`
	Connected time.Time    `json:"connected"`
	Identity  string       `json:"identity,omitempty"` // the authenticated SPIFFE ID, if any
	Types     []syncStatus `json:"types"`
	// Convergence is the proxy's change→ACK record (ads.ConvergenceStatus);
	// absent from daemons without it.
	Convergence *convergenceJSON `json:"convergence,omitempty"`
}

type convergenceJSON struct {
	Objective string `json:"objective,omitempty"`
	Last      string `json:"last,omitempty"`
	Worst     string `json:"worst,omitempty"`
	Converged int    `json:"converged"`
	Missed    int    `json:"missed"`
	Pending   int    `json:"pending"`
}

type configDump struct {
	Connection string                       `json:"connection"`
	Types      map[string][]json.RawMessage `json:"types"`
}

// get fetches path from the daemon into v (or returns the raw body if v
// is nil). Errors name the URL and, for a non-200 answer, the daemon's
// message.
func (e *Env) get(path string, q url.Values, v any) ([]byte, error) {
	u := e.url(path, q)
	resp, err := e.HTTP.Get(u)
	body, err := e.answer(u, resp, err)
	if err != nil {
		return nil, err
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			return nil, fmt.Errorf("%s: unexpected answer (an older baremeshd?): %w", u, err)
		}
	}
	return body, nil
}

// url is the daemon's base URL (http:// if no scheme is given) + path?q.
func (e *Env) url(path string, q url.Values) string {
	base := strings.TrimRight(e.Daemon, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u := base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

type httpError struct {
	url  string
	code int
	msg  string
}

func (h *httpError) Error() string { return fmt.Sprintf("%s: %d %s", h.url, h.code, h.msg) }

func (e *Env) fail(err error) int {
	fmt.Fprintln(e.Stderr, "baremeshctl:", err)
	return 1
}

// answer reads a daemon's answer to u: the body of a 200, else an error
// naming the URL and the daemon's message (or that it cannot be reached).
func (e *Env) answer(u string, resp *http.Response, err error) ([]byte, error) {
	if err != nil {
		return nil, fmt.Errorf("cannot reach baremeshd (is it running? --daemon %s): %w", e.Daemon, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &httpError{url: u, code: resp.StatusCode, msg: strings.TrimSpace(string(body))}
	}
	return body, nil
}
