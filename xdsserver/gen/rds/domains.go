package rds

import (
	"slices"
	"strconv"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// domainSet records the domains the virtual hosts of one sidecar route
// config claimed: Envoy rejects a domain used twice in one config, so the
// first virtual host to claim a domain keeps it.
//
// Domains are claimed in pairs, a name and its "name:PORT" form, and two
// such forms are equal only if their names are; a name without ':' is
// no such form. So while every list claimed is such pairs (names without
// ':'), the set holds only the names: one map operation per pair instead
// of two. A list that is not pairs (an IPv6 VirtualService host) turns
// the set into one of every domain. Until a second virtual host, the
// domains are found by scanning the first.
type domainSet struct {
	port  uint32
	hint  int // domains expected, to size names
	names map[string]struct{}
	all   bool // names holds every domain
}

// claim keeps the domains of list that no host of hosts (the config's so
// far) has taken, dropping repeats, and takes them; it reuses list's
// array.
func (s *domainSet) claim(hosts []*routev3.VirtualHost, list []string) []string {
	out := list[:0]
	if len(hosts) == 0 {
		for _, d := range list {
			if !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
		return out
	}
	paired := s.paired(list)
	s.index(hosts, paired)
	if s.all {
		for _, d := range list {
			if _, ok := s.names[d]; !ok {
				s.names[d] = struct{}{}
				out = append(out, d)
			}
		}
		return out
	}
	for i := 0; i < len(list); i += 2 {
		if _, ok := s.names[list[i]]; !ok {
			s.names[list[i]] = struct{}{}
			out = append(out, list[i], list[i+1])
		}
	}
	return out
}

// claimAll takes the domains of list, distinct ones, if none is taken;
// else it takes nothing.
func (s *domainSet) claimAll(hosts []*routev3.VirtualHost, list []string) bool {
	if len(hosts) == 0 {
		return true
	}
	paired := s.paired(list)
	s.index(hosts, paired)
	step := 2
	if s.all {
		step = 1
	}
	for i := 0; i < len(list); i += step {
		if _, ok := s.names[list[i]]; ok {
			return false
		}
	}
	for i := 0; i < len(list); i += step {
		s.names[list[i]] = struct{}{}
	}
	return true
}

// taken reports whether a host of hosts claimed the name d (no ':').
func (s *domainSet) taken(hosts []*routev3.VirtualHost, d string) bool {
	if s.names != nil {
		_, ok := s.names[d]
		return ok
	}
	for _, h := range hosts {
		if slices.Contains(h.GetDomains(), d) {
			return true
		}
	}
	return false
}

// paired reports whether list is pairs of a name without ':' and its
// ":PORT" form.
func (s *domainSet) paired(list []string) bool {
	if len(list)%2 != 0 {
		return false
	}
	var buf [11]byte
	port := strconv.AppendUint(append(buf[:0], ':'), uint64(s.port), 10)
	for i := 0; i < len(list); i += 2 {
		n, f := list[i], list[i+1]
		if strings.IndexByte(n, ':') >= 0 || len(f) != len(n)+len(port) || !strings.HasPrefix(f, n) || f[len(n):] != string(port) {
			return false
		}
	}
	return true
}

// index makes names from hosts if there is none yet, and turns it into
// a set of every domain when the list to claim is not paired.
func (s *domainSet) index(hosts []*routev3.VirtualHost, paired bool) {
	if s.names != nil {
		if !paired && !s.all {
			s.fill(hosts, true)
		}
		return
	}
	all := !paired
	for _, h := range hosts {
		all = all || !s.paired(h.GetDomains())
	}
	s.fill(hosts, all)
}

// fill makes names from the domains of hosts: every one, or the names of
// their pairs.
func (s *domainSet) fill(hosts []*routev3.VirtualHost, all bool) {
	n := s.hint
	if all {
		n *= 2
	}
	s.names, s.all = make(map[string]struct{}, max(n, 8)), all
	for _, h := range hosts {
		for i, d := range h.GetDomains() {
			if all || i%2 == 0 {
				s.names[d] = struct{}{}
			}
		}
	}
}
