package model_test

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/baremesh/baremesh/core/config"
	"github.com/baremesh/baremesh/core/config/configtest"
	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/core/store"
)

func v4(t *testing.T, a *model.Allocator, k model.ServiceKey) string {
	t.Helper()
	aa, err := a.Allocate(k)
	if err != nil {
		t.Fatalf("%v: %v", k, err)
	}
	return aa.IPv4.String()
}

// linearProbe is the allocator as it was before the bitmap: the hash of
// namespace/hostname, then the next free address in order, skipping .0
// and .255. The bitmap allocator must give exactly its addresses, so that
// no service's address changes with the new allocator.
type linearProbe struct {
	byKey  map[model.ServiceKey]uint32
	byAddr map[uint32]bool
}

func (l *linearProbe) allocate(k model.ServiceKey) (uint32, bool) {
	if n, ok := l.byKey[k]; ok {
		return n, true
	}
	if len(l.byAddr) == 65_024 {
		return 0, false
	}
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%s", k.Namespace, k.Hostname)
	start := h.Sum32() % (1 << 16)
	for i := uint32(0); i < 1<<16; i++ {
		n := (start + i) % (1 << 16)
		if n&0xff == 0 || n&0xff == 0xff || l.byAddr[n] {
			continue
		}
		l.byKey[k], l.byAddr[n] = n, true
		return n, true
	}
	panic("unreachable")
}

func (l *linearProbe) release(k model.ServiceKey) {
	if n, ok := l.byKey[k]; ok {
		delete(l.byKey, k)
		delete(l.byAddr, n)
	}
}

// TestAllocateAsLinearProbing: under a random mix of allocations and
// releases that fills the range, the allocator gives every host the
// address linear probing gives it, and fails exactly when it would.
func TestAllocateAsLinearProbing(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	a := model.NewAllocator()
	ref := &linearProbe{byKey: map[model.ServiceKey]uint32{}, byAddr: map[uint32]bool{}}
	var live []model.ServiceKey
	failures := 0
	for i := 0; i < 100_000; i++ {
		if len(live) > 0 && rng.IntN(10) == 0 {
			j := rng.IntN(len(live))
			a.Release(live[j])
			ref.release(live[j])
			live[j] = live[len(live)-1]
			live = live[:len(live)-1]
			continue
		}
		k := model.ServiceKey{Hostname: fmt.Sprintf("h%d.mesh", i), Namespace: fmt.Sprintf("ns%d", i%7)}
		got, err := a.Allocate(k)
		want, ok := ref.allocate(k)
		if !ok {
			if !errors.Is(err, model.ErrAddressesExhausted) {
				t.Fatalf("%v: range full, got %v, %v", k, got, err)
			}
			failures++
			continue
		}
		wantIP := netip.AddrFrom4([4]byte{240, 240, byte(want >> 8), byte(want)})
		if err != nil || got.IPv4 != wantIP {
			t.Fatalf("%v: got %v, %v; linear probing gives %v", k, got.IPv4, err, wantIP)
		}
		live = append(live, k)
	}
	if failures == 0 {
		t.Fatal("the range never filled up; the test does not cover exhaustion")
	}
}

// TestAllocateExhaustion: 65,024 hosts get distinct addresses in
// 240.240.0.0/16 (no .0, no .255) and matching ones in 2001:2::/48; the
// next host gets ErrAddressesExhausted at once; a released address goes
// to the next host that asks.
func TestAllocateExhaustion(t *testing.T) {
	a := model.NewAllocator()
	v4net, v6net := netip.MustParsePrefix("240.240.0.0/16"), netip.MustParsePrefix("2001:2::/48")
	seen := map[netip.Addr]bool{}
	keys := hostKeys(65_024)
	for _, k := range keys {
		aa, err := a.Allocate(k)
		if err != nil {
			t.Fatalf("%v after %d allocations: %v", k, len(seen), err)
		}
		b := aa.IPv4.As4()
		if !v4net.Contains(aa.IPv4) || b[3] == 0 || b[3] == 255 || seen[aa.IPv4] {
			t.Fatalf("%v: bad or repeated IPv4 address %v", k, aa.IPv4)
		}
		seen[aa.IPv4] = true
		want6 := netip.MustParseAddr(fmt.Sprintf("2001:2::f0f0:%02x%02x", b[2], b[3]))
		if !v6net.Contains(aa.IPv6) || aa.IPv6 != want6 {
			t.Fatalf("%v: IPv6 address %v, want %v", k, aa.IPv6, want6)
		}
	}
	extra := model.ServiceKey{Hostname: "one-too-many.mesh", Namespace: "ns"}
	start := time.Now()
	for range 1000 {
		if _, err := a.Allocate(extra); !errors.Is(err, model.ErrAddressesExhausted) || !strings.Contains(err.Error(), "ns/one-too-many.mesh") {
			t.Fatalf("full range: err = %v, want ErrAddressesExhausted naming the host", err)
		}
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("1,000 allocations in a full range took %v", el)
	}
	freed, _ := a.Allocate(keys[12345])
	a.Release(keys[12345])
	if got, err := a.Allocate(extra); err != nil || got != freed {
		t.Fatalf("after a release: %v, %v; want the freed %v", got, err, freed)
	}
}

// manyHostsEntry is a ServiceEntry in namespace ns with n hosts and no
// addresses.
func manyHostsEntry(t testing.TB, n int) config.Config {
	c := configtest.Typed(t, `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: many, namespace: ns}
spec:
  hosts: [placeholder.mesh]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
`)
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("h%d.ns.mesh", i)
	}
	c.Spec.(*networking.ServiceEntry).Hosts = hosts
	c.Source = config.Source{Name: "file:/etc/baremesh", File: "/etc/baremesh/many.yaml", Line: 1}
	return c
}

// TestApplyManyAddresslessHosts: a ServiceEntry with 70,000 address-less
// hosts, 4,976 more than the range holds, is taken whole: every host is a
// service, the range is filled and the rest get none. Its cost (before the
// bitmap allocator every host past the 65,024th scanned the whole range,
// 4,976 x 65,536 probes) is BenchmarkRegistryApplyAddressless's to show,
// not a wall-clock bound here (one failed under -race on a busy machine).
func TestApplyManyAddresslessHosts(t *testing.T) {
	c := manyHostsEntry(t, 70_000)
	reg := model.NewRegistry(model.NewAllocator())
	if ch := reg.Apply(model.Update{Events: []store.Event{{Type: store.EventAdd, New: &c}}}); len(ch.Services) != 70_000 {
		t.Fatalf("%d services changed, want 70,000", len(ch.Services))
	}
	with := 0
	for _, s := range reg.Services() {
		if s.AutoAllocated {
			with++
		}
	}
	if with != 65_024 {
		t.Fatalf("%d services have an address, want 65,024", with)
	}
}

// TestAddressExhaustionIsAProblem: the hosts that get no address are one
// named problem of their ServiceEntry, with its file and line; removing
// hosts so that all fit clears it.
func TestAddressExhaustionIsAProblem(t *testing.T) {
	c := manyHostsEntry(t, 65_030)
	reg := model.NewRegistry(model.NewAllocator())
	reg.Apply(model.Update{Events: []store.Event{{Type: store.EventAdd, New: &c}}})
	ps := reg.Problems()
	if len(ps) != 1 {
		t.Fatalf("problems = %+v, want one", ps)
	}
	p := ps[0]
	if p.Origin != "/etc/baremesh/many.yaml" || p.Line != 1 || p.Resource != "ServiceEntry/ns/many" ||
		!strings.HasPrefix(p.Error, "6 of 65030 hosts have no address (") || !strings.Contains(p.Error, model.ErrAddressesExhausted.Error()) {
		t.Fatalf("problem = %+v", p)
	}
	var missing []string
	for _, s := range reg.Services() {
		if !s.AutoAllocated {
			missing = append(missing, s.Hostname)
			if len(s.Addresses) != 0 {
				t.Fatalf("%s: addresses %v without allocation", s.Hostname, s.Addresses)
			}
		} else if s.AutoAllocatedIPv6 == "" {
			t.Fatalf("%s: no IPv6 address", s.Hostname)
		}
	}
	if len(missing) != 6 || !strings.Contains(p.Error, missing[0]) {
		t.Fatalf("hosts without address %v; problem %q", missing, p.Error)
	}
	// Fewer hosts: every one has an address, the problem is gone.
	old := c
	nu := manyHostsEntry(t, 60_000)
	reg.Apply(model.Update{Events: []store.Event{{Type: store.EventUpdate, Old: &old, New: &nu}}})
	if ps := reg.Problems(); len(ps) != 0 {
		t.Fatalf("problems after shrinking = %+v", ps)
	}
	// Hosts that stayed keep their addresses.
	reg2 := model.NewRegistry(model.NewAllocator())
	reg2.Apply(model.Update{Events: []store.Event{{Type: store.EventAdd, New: &c}}})
	a, b := reg.Services(), reg2.Services()
	for i := 0; i < 100; i++ {
		if a[i].Hostname != b[i].Hostname || !slices.Equal(a[i].Addresses, b[i].Addresses) || a[i].AutoAllocatedIPv6 != b[i].AutoAllocatedIPv6 {
			t.Fatalf("%s: %v %s, then %v %s", a[i].Hostname, b[i].Addresses, b[i].AutoAllocatedIPv6, a[i].Addresses, a[i].AutoAllocatedIPv6)
		}
	}
	// Deleting the ServiceEntry clears its problem too.
	reg2.Apply(model.Update{Events: []store.Event{{Type: store.EventDelete, Old: &c}}})
	if ps := reg2.Problems(); len(ps) != 0 {
		t.Fatalf("problems after delete = %+v", ps)
	}
}
