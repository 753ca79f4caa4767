package model

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/bits"
	"net/netip"
	"sync"
)

// ErrAddressesExhausted is the error for a host that gets no address
// because every address of 240.240.0.0/16 is taken.
var ErrAddressesExhausted = errors.New("no automatic address left: all 65,024 addresses of 240.240.0.0/16 are taken")

const (
	allocSlots = 1 << 16         // 240.240.0.0/16
	allocWords = allocSlots / 64 // occupancy bitmap words
	allocSumms = allocWords / 64 // summary words: one bit per full word
)

// Allocator gives ServiceEntry hostnames without declared addresses a
// virtual IPv4 address from 240.240.0.0/16 and an IPv6 address from
// 2001:2::/48, Istio's auto-allocation ranges. The preferred address is a
// hash of namespace/hostname, so the same input gets the same address
// across restarts; when it is taken, the next free address after it is
// taken (wrapping around). An allocation, once made, sticks for the life
// of the process, so a service's address never moves because another
// service came or went.
//
// Finding the next free address costs at most a few dozen word
// operations whatever the occupancy (a two-level bitmap of taken
// addresses), and a full range fails at once with ErrAddressesExhausted.
// Safe for concurrent use.
type Allocator struct {
	mu    sync.Mutex
	byKey map[ServiceKey]uint16
	// used has a bit per address, set when taken (the reserved .0 and
	// .255 of each /24 are always set); full has a bit per word of used,
	// set when that word is all ones.
	used [allocWords]uint64
	full [allocSumms]uint64
	free int
}

// NewAllocator returns an empty allocator.
func NewAllocator() *Allocator {
	// free counts down to 65,024 as the reserved addresses are marked.
	a := &Allocator{byKey: map[ServiceKey]uint16{}, free: allocSlots}
	for n := 0; n < allocSlots; n += 256 {
		a.mark(uint32(n))       // x.x.N.0
		a.mark(uint32(n + 255)) // x.x.N.255, which some stacks mistreat
	}
	return a
}

// AutoAddresses are the addresses allocated to one host: an IPv4 address
// in 240.240.0.0/16 and the IPv6 address of the same slot in 2001:2::/48,
// 2001:2::f0f0:XXYY for 240.240.XX.YY (Istio's mapping, zero-padded so
// that two slots never share an address).
type AutoAddresses struct {
	IPv4, IPv6 netip.Addr
}

// Allocate returns k's addresses, allocating them if need be, or
// ErrAddressesExhausted.
func (a *Allocator) Allocate(k ServiceKey) (AutoAddresses, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n, ok := a.byKey[k]; ok {
		return slotAddresses(n), nil
	}
	if a.free == 0 {
		return AutoAddresses{}, fmt.Errorf("%s: %w", k, ErrAddressesExhausted)
	}
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%s", k.Namespace, k.Hostname)
	n := a.nextFree(h.Sum32() % allocSlots)
	a.mark(n)
	a.byKey[k] = uint16(n)
	return slotAddresses(uint16(n)), nil
}

// Release frees k's addresses.
func (a *Allocator) Release(k ServiceKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n, ok := a.byKey[k]; ok {
		delete(a.byKey, k)
		w := n / 64
		a.used[w] &^= 1 << (n % 64)
		a.full[w/64] &^= 1 << (w % 64)
		a.free++
	}
}

func (a *Allocator) mark(n uint32) {
	w := n / 64
	a.used[w] |= 1 << (n % 64)
	if a.used[w] == ^uint64(0) {
		a.full[w/64] |= 1 << (w % 64)
	}
	a.free--
}

// nextFree returns the first free slot at or after start, wrapping
// around; there must be one.
func (a *Allocator) nextFree(start uint32) uint32 {
	w := start / 64
	if m := ^a.used[w] &^ (1<<(start%64) - 1); m != 0 {
		return w*64 + uint32(bits.TrailingZeros64(m))
	}
	j, ok := a.nextOpenWord(w + 1)
	if !ok {
		j, _ = a.nextOpenWord(0) // may be w again, below start
	}
	return j*64 + uint32(bits.TrailingZeros64(^a.used[j]))
}

// nextOpenWord returns the first word at or after from with a free slot.
func (a *Allocator) nextOpenWord(from uint32) (uint32, bool) {
	for s := from / 64; s < allocSumms; s++ {
		m := ^a.full[s]
		if s == from/64 {
			m &^= 1<<(from%64) - 1
		}
		if m != 0 {
			return s*64 + uint32(bits.TrailingZeros64(m)), true
		}
	}
	return 0, false
}

func slotAddresses(n uint16) AutoAddresses {
	hi, lo := byte(n>>8), byte(n)
	return AutoAddresses{
		IPv4: netip.AddrFrom4([4]byte{240, 240, hi, lo}),
		IPv6: netip.AddrFrom16([16]byte{0x20, 0x01, 0, 2, 12: 0xf0, 13: 0xf0, 14: hi, 15: lo}),
	}
}
