package ads

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Why a stream ended, as logged ("proxy disconnected", reason=…) and
// counted in baremesh_xds_stream_ends_total{reason}. The classes are few
// and fixed so the metric stays small; the log line carries the error.
const (
	endClientClosed = "client_closed" // the proxy closed its side (EOF)
	endCanceled     = "client_cancel" // the proxy cancelled the stream
	endTransport    = "transport"     // the connection went away under the stream (keepalive, reset, server stop)
	endRecvError    = "recv_error"    // reading a request failed otherwise
	endSendError    = "send_error"    // writing a response failed, or a protocol error ended it
	endSendTimeout  = "send_timeout"  // no response accepted for the send timeout: the proxy did not read
	endOther        = "other"         // none of the above (not expected)
)

// streamEnd classifies how serve ended: err is what serve returned, recv
// the receive error that ended it (nil if none), ctx the stream's context.
func streamEnd(ctx context.Context, err, recv error) string {
	switch {
	case recv != nil && errors.Is(recv, io.EOF):
		return endClientClosed
	case recv != nil && status.Code(recv) == codes.Canceled:
		return endCanceled
	case recv != nil && status.Code(recv) == codes.Unavailable:
		return endTransport
	case recv != nil:
		return endRecvError
	case err != nil && status.Code(err) == codes.DeadlineExceeded:
		return endSendTimeout
	case err != nil:
		return endSendError
	case ctx.Err() != nil:
		// gRPC cancels a stream's context when its connection closes
		// (keepalive timeout, reset, server stop) or the client cancels without a
		// final read error reaching us first.
		return endTransport
	}
	return endOther
}

// firstErr is the first non-nil error, for the log line.
func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
