package ads

import "github.com/baremesh/baremesh/core/model"

// Proxies returns the proxy of every open connection, sorted by
// connection ID (for debug pages that judge what a proxy is served,
// such as the gateway credential problems on /debug/configz). The
// proxies must not be altered.
func (s *Server) Proxies() []*model.Proxy {
	conns := s.connsSorted()
	out := make([]*model.Proxy, len(conns))
	for i, c := range conns {
		out[i] = c.proxy
	}
	return out
}
