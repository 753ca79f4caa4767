package ads

import (
	"context"
	"errors"
	"io"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestStreamEnd: every way a stream ends is told apart in the log and
// the baremesh_xds_stream_ends_total metric (issue #11 item 8: streams
// used to end with only "proxy disconnected").
func TestStreamEnd(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name      string
		ctx       context.Context
		err, recv error
		want      string
	}{
		{"client closed its side", live, nil, io.EOF, endClientClosed},
		{"client cancelled", gone, nil, status.Error(codes.Canceled, "context canceled"), endCanceled},
		{"connection lost", gone, nil, status.Error(codes.Unavailable, "transport is closing"), endTransport},
		{"other read error", live, errors.New("boom"), errors.New("boom"), endRecvError},
		{"send failed", live, status.Error(codes.Unavailable, "send"), nil, endSendError},
		{"context ended, keepalive or reset", gone, nil, nil, endTransport},
		{"nothing to tell", live, nil, nil, endOther},
	}
	for _, tt := range tests {
		if got := streamEnd(tt.ctx, tt.err, tt.recv); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}
