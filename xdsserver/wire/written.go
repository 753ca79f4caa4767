package wire

import (
	"sync"

	"google.golang.org/grpc/mem"
)

// Written returns a channel closed once gRPC has taken all of m into its
// connection's writer (the frames are in the write buffer or on the
// socket), or has dropped m because the stream or connection ended.
// gRPC's SendMsg returns as soon as a response is queued; a send slot
// held only until then bounded nothing of the writing itself (issue #30:
// 2,000 connections writing at once, each with a pooled write buffer
// and its goroutines runnable, behind which /metrics waited). Call it
// once, before m is sent.
//
// How: m's last part becomes a buffer of gRPC's mem package whose pool
// is the signal. gRPC frees each part once its bytes are written (and
// every part when it drops a response), so the last part's return is
// the end of m.
func (m *Msg) Written() <-chan struct{} {
	m.Size() // known before the parts are freed
	n := len(m.parts)
	done := make(chan struct{})
	if n == 0 {
		close(done)
		return done
	}
	last := m.parts[n-1]
	// gRPC's mem passes a buffer below its pooling threshold around
	// without counting references (and so never returns it): the
	// signal's buffer has room beyond the threshold.
	c := max(last.Len(), 1)
	for mem.IsBelowBufferPoolingThreshold(c) {
		c *= 2
	}
	b := make([]byte, 0, c)
	b = append(b, last.ReadOnlyData()...)
	last.Free()
	m.parts[n-1] = mem.NewBuffer(&b, &signalPool{done: done})
	return done
}

// signalPool is the pool of Written's buffer: the buffer's return closes
// done.
type signalPool struct {
	once sync.Once
	done chan struct{}
}

func (p *signalPool) Get(int) *[]byte { panic("wire: signalPool hands out nothing") }

func (p *signalPool) Put(*[]byte) { p.once.Do(func() { close(p.done) }) }
