package reconcile

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestControlPlane(t *testing.T) {
	version := "0.2.1"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"version": %q}`, version)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	cp := &ControlPlane{Address: addr, VersionURL: srv.URL + "/version", AgentVersion: "0.1.0", Client: srv.Client()}
	if s := cp.Reconcile(context.Background()); s.State != StateReady || !strings.Contains(s.Reason, "version 0.2.1") {
		t.Errorf("in-skew control plane: %+v", s)
	}
	version = "0.3.0"
	if s := cp.Reconcile(context.Background()); s.State != StateWarning || !strings.Contains(s.Reason, "refusing control plane version") {
		t.Errorf("skewed control plane: %+v", s)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	down := &ControlPlane{Address: closed, AgentVersion: "0.1.0"}
	if s := down.Reconcile(context.Background()); s.State != StateWarning || !strings.Contains(s.Reason, "unreachable") {
		t.Errorf("unreachable control plane: %+v", s)
	}
	if s := (&ControlPlane{}).Reconcile(context.Background()); s.State != StateReady {
		t.Errorf("unconfigured control plane: %+v", s)
	}
}
