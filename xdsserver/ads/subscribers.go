package ads

import (
	"slices"

	"github.com/baremesh/baremesh/core/model"
	"github.com/baremesh/baremesh/xdsserver/xdstype"
)

// Subscription is one type a connection subscribes to.
type Subscription struct {
	Type *xdstype.Type
	// Names are the subscribed names (a copy), nil for a wildcard.
	Names []string
}

// Subscriber is one connection's proxy and what it subscribes to, for
// dry runs that regenerate its config (xdsserver/dryrun).
type Subscriber struct {
	Conn  string
	Proxy *model.Proxy // shared with the connection; must not be altered
	Subs  []Subscription
}

// Subscribers returns every connection (or those whose proxy ID or
// connection ID is id, if id is not empty), sorted by connection, each
// with its subscriptions in push order.
func (s *Server) Subscribers(id string) []Subscriber {
	var out []Subscriber
	for _, c := range s.connsSorted() {
		if id != "" && c.proxy.ID != id && c.id != id {
			continue
		}
		sb := Subscriber{Conn: c.id, Proxy: c.proxy}
		c.mu.Lock()
		for _, w := range c.subs {
			var names []string
			if !w.wildcard {
				names = slices.Clone(w.names)
				if names == nil {
					names = []string{}
				}
			}
			sb.Subs = append(sb.Subs, Subscription{Type: w.typ, Names: names})
		}
		c.mu.Unlock()
		slices.SortFunc(sb.Subs, func(a, b Subscription) int { return a.Type.Order - b.Type.Order })
		out = append(out, sb)
	}
	return out
}
