package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// ControlPlane checks the link to the control plane: its xDS address
// answers, and (when VersionURL is set) its version is within one minor
// version of the agent's. The agent cannot stop the proxy from talking to
// a skewed control plane; it refuses it by reporting a Warning.
type ControlPlane struct {
	Address      string // host:port of the xDS server
	VersionURL   string // optional; answers {"version": "x.y.z"} or plain text
	AgentVersion string
	Client       *http.Client // default: 5s timeout
}

// Name implements Component.
func (c *ControlPlane) Name() string { return "controlplane" }

// Reconcile implements Component.
func (c *ControlPlane) Reconcile(ctx context.Context) Status {
	if c.Address == "" {
		return Ready("no control plane configured")
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", c.Address)
	if err != nil {
		return Warning("control plane %s unreachable: %v", c.Address, err)
	}
	conn.Close()
	if c.VersionURL == "" {
		return Ready("control plane %s reachable", c.Address)
	}
	v, err := c.fetchVersion(ctx)
	if err != nil {
		return Warning("control plane version: %v", err)
	}
	if err := CheckSkew(c.AgentVersion, v); err != nil {
		return Warning("refusing control plane version %q: %v", v, err)
	}
	return Ready("control plane %s reachable, version %s", c.Address, v)
}

func (c *ControlPlane) fetchVersion(ctx context.Context) (string, error) {
	client := c.Client
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.VersionURL, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", c.VersionURL, resp.Status)
	}
	var doc struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(body, &doc) == nil && doc.Version != "" {
		return doc.Version, nil
	}
	return strings.TrimSpace(string(body)), nil
}
