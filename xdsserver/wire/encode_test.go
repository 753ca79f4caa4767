package wire

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"google.golang.org/grpc/mem"
)

// Coalescing keeps the bytes and their order, copies small parts into
// chunks of at most a frame and passes large parts through untouched.
func TestCoalesce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 20 {
		var parts mem.BufferSlice
		for range rng.IntN(1500) {
			n := rng.IntN(400)
			if rng.IntN(100) == 0 {
				n = chunkSize/2 + rng.IntN(3*chunkSize)
			}
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			parts = append(parts, mem.SliceBuffer(b))
		}
		want := parts.Materialize()
		got := coalesce(parts)
		if !bytes.Equal(got.Materialize(), want) {
			t.Fatalf("round %d: coalesced bytes differ", round)
		}
		if len(parts) <= 64 {
			continue
		}
		// A chunk is flushed when the next small part does not fit (it
		// is then more than half full), before a large part or at the end.
		small, large := 0, 0
		for _, p := range parts {
			if p.Len() >= chunkSize/2 {
				large++
			} else {
				small += p.Len()
			}
		}
		if max := small/(chunkSize/2) + 2*large + 1; len(got) > max {
			t.Fatalf("round %d: %d parts became %d buffers, want at most %d", round, len(parts), len(got), max)
		}
		got.Free()
	}
}
