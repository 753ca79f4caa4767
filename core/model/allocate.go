package model

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"sync"
)

// Allocator gives ServiceEntry hostnames without declared addresses a
// virtual IPv4 address from 240.240.0.0/16, Istio's auto-allocation range.
// The address is a hash of namespace/hostname, so the same input gets the
// same address across restarts; on a collision the next free address is
// taken. An allocation, once made, sticks for the life of the process, so
// a service's address never moves because another service came or went.
// Safe for concurrent use.
type Allocator struct {
	mu     sync.Mutex
	byKey  map[ServiceKey]netip.Addr
	byAddr map[netip.Addr]ServiceKey
}

// NewAllocator returns an empty allocator.
func NewAllocator() *Allocator {
	return &Allocator{byKey: map[ServiceKey]netip.Addr{}, byAddr: map[netip.Addr]ServiceKey{}}
}

const allocSize = 1 << 16

// Allocate returns k's address, allocating it if need be.
func (a *Allocator) Allocate(k ServiceKey) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ip, ok := a.byKey[k]; ok {
		return ip.String()
	}
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%s", k.Namespace, k.Hostname)
	start := h.Sum32() % allocSize
	for i := uint32(0); i < allocSize; i++ {
		n := (start + i) % allocSize
		if n&0xff == 0 || n&0xff == 0xff {
			continue // skip .0 and .255, which some stacks mistreat
		}
		ip := netip.AddrFrom4([4]byte{240, 240, byte(n >> 8), byte(n)})
		if _, taken := a.byAddr[ip]; !taken {
			a.byKey[k] = ip
			a.byAddr[ip] = k
			return ip.String()
		}
	}
	return "" // 65,024 services without addresses: none left
}

// Release frees k's address.
func (a *Allocator) Release(k ServiceKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ip, ok := a.byKey[k]; ok {
		delete(a.byKey, k)
		delete(a.byAddr, ip)
	}
}
