package load

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// bytePool hands out byte slices from power-of-two tiers (256 B to
// 64 MB). Unlike grpc's pools it does not clear a slice it hands out:
// each user overwrites what it asks for (grpc reads a frame into its
// buffer and fills a write buffer before sending it; the codec copies a
// message into its buffer). It is safe for concurrent use.
type bytePool struct {
	tiers [maxPoolBits + 1]sync.Pool
}

const minPoolBits, maxPoolBits = 8, 26

var _ mem.BufferPool = (*bytePool)(nil)

// buffers serves the proxies' connections (frames read, writes) and the
// codec's copies of the responses.
var buffers = &bytePool{}

// Get returns a slice of length n, its content undefined.
func (p *bytePool) Get(n int) *[]byte {
	k := minPoolBits
	if n > 1<<minPoolBits {
		k = bits.Len(uint(n - 1))
	}
	if k > maxPoolBits {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.tiers[k].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<k)
	return &b
}

// Put returns a slice from Get.
func (p *bytePool) Put(b *[]byte) {
	c := cap(*b)
	if c < 1<<minPoolBits || c > 1<<maxPoolBits || c&(c-1) != 0 {
		return
	}
	p.tiers[bits.Len(uint(c-1))].Put(b)
}
