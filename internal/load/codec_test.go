package load

import "testing"

func TestBytePool(t *testing.T) {
	p := &bytePool{}
	for _, n := range []int{0, 1, 256, 257, 16 << 10, 100 << 10, 1 << 20, 65 << 20} {
		b := p.Get(n)
		if len(*b) != n {
			t.Fatalf("Get(%d): len %d", n, len(*b))
		}
		p.Put(b)
		if c := cap(*p.Get(n)); n > 0 && n <= 64<<20 && (c < n || c&(c-1) != 0) {
			t.Errorf("Get(%d) again: cap %d", n, c)
		}
	}
	s := make([]byte, 300) // not from Get: dropped
	p.Put(&s)
}
