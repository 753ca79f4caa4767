package gatewayapi

import "slices"

// Status is the status baremesh computes for one Gateway API object:
// its own conditions (GatewayClass, Gateway), its listeners' (Gateway)
// and its parents' (routes). It is plain data, JSON-encoded as the API's
// status stanza would hold it (without times and generations, which the
// writer adds).
type Status struct {
	Conditions []Condition       `json:"conditions,omitempty"`
	Listeners  []ListenerStatus  `json:"listeners,omitempty"`
	Parents    []RouteParentStat `json:"parents,omitempty"`
}

// Condition is one condition.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// ListenerStatus is one listener's status.
type ListenerStatus struct {
	Name           string      `json:"name"`
	AttachedRoutes int32       `json:"attachedRoutes"`
	Conditions     []Condition `json:"conditions"`
}

// RouteParentStat is a route's status for one parentRef.
type RouteParentStat struct {
	ParentRef      ParentRef   `json:"parentRef"`
	ControllerName string      `json:"controllerName"`
	Conditions     []Condition `json:"conditions"`
}

// ParentRef is a parentRef as the route wrote it, defaults filled in.
type ParentRef struct {
	Group       string `json:"group"`
	Kind        string `json:"kind"`
	Namespace   string `json:"namespace,omitempty"`
	Name        string `json:"name"`
	SectionName string `json:"sectionName,omitempty"`
	Port        int32  `json:"port,omitempty"`
}

// Condition finds a condition of the object's own list.
func (s *Status) Condition(typ string) (Condition, bool) {
	i := slices.IndexFunc(s.Conditions, func(c Condition) bool { return c.Type == typ })
	if i < 0 {
		return Condition{}, false
	}
	return s.Conditions[i], true
}

type condition struct {
	Type    string
	Status  bool
	Reason  string
	Message string
}

func (c condition) api() Condition {
	s := "False"
	if c.Status {
		s = "True"
	}
	return Condition{Type: c.Type, Status: s, Reason: c.Reason, Message: c.Message}
}

func setCond(list []Condition, c condition) []Condition {
	a := c.api()
	for i := range list {
		if list[i].Type == a.Type {
			list[i] = a
			return list
		}
	}
	return append(list, a)
}

func (s *Status) set(_ string, c condition) { s.Conditions = setCond(s.Conditions, c) }

type listenerRef struct {
	s *Status
	i int
}

func (s *Status) listener(name string) listenerRef {
	i := slices.IndexFunc(s.Listeners, func(l ListenerStatus) bool { return l.Name == name })
	if i < 0 {
		s.Listeners = append(s.Listeners, ListenerStatus{Name: name, Conditions: []Condition{}})
		i = len(s.Listeners) - 1
	}
	return listenerRef{s, i}
}

func (l listenerRef) set(c condition) {
	l.s.Listeners[l.i].Conditions = setCond(l.s.Listeners[l.i].Conditions, c)
}
