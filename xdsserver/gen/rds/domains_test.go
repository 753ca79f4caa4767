package rds

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// TestDomainSet checks domainSet against a plain set of every domain
// claimed, over random sequences of paired lists (as services and
// VirtualService hosts claim), unpaired ones (IPv6 hosts) and repeats.
func TestDomainSet(t *testing.T) {
	names := []string{"a", "b", "c.ns", "10.0.0.1", "*", "2001:db8::1", "a:80", "b:81", "[a]"}
	const port = 80
	form := func(n string) string { // as serviceDomains and gen.HostPort
		for _, c := range n {
			if c == ':' {
				return "[" + n + "]:" + strconv.Itoa(port)
			}
		}
		return n + ":" + strconv.Itoa(port)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		s := domainSet{port: port, hint: r.IntN(4)}
		plain := map[string]bool{}
		var hosts []*routev3.VirtualHost
		for step := range 1 + r.IntN(8) {
			var list []string
			for range 1 + r.IntN(3) {
				n := names[r.IntN(len(names))]
				switch r.IntN(7) {
				case 0:
					list = append(list, n)
				case 1:
					list = append(list, form(n))
				case 2: // a pair no generator makes, for the set to be exact anyway
					list = append(list, n, n+":"+strconv.Itoa(port))
				default:
					list = append(list, n, form(n))
				}
			}
			all := r.IntN(4) == 0
			if all { // claimAll is given distinct domains
				var distinct []string
				for _, d := range list {
					if !slices.Contains(distinct, d) {
						distinct = append(distinct, d)
					}
				}
				list = distinct
			}
			var want []string
			for _, d := range list {
				if !plain[d] {
					plain[d] = true
					want = append(want, d)
				}
			}
			if all { // everything or nothing
				free := len(want) == len(list)
				if got := s.claimAll(hosts, slices.Clone(list)); got != free {
					t.Fatalf("round %d step %d: claimAll(%q) = %v, want %v", round, step, list, got, free)
				}
				if !free { // the plain set took the free ones: undo
					for _, d := range want {
						delete(plain, d)
					}
					continue
				}
			} else {
				got := s.claim(hosts, slices.Clone(list))
				if !slices.Equal(got, want) {
					t.Fatalf("round %d step %d: claim(%q) = %q, want %q", round, step, list, got, want)
				}
			}
			if len(want) > 0 {
				hosts = append(hosts, &routev3.VirtualHost{Domains: want})
			}
		}
		if got := s.taken(hosts, "*"); got != plain["*"] {
			t.Fatalf("round %d: taken(*) = %v, want %v", round, got, plain["*"])
		}
	}
}
