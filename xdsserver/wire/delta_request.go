package wire

import (
	"slices"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
)

// DeltaRequest is a DeltaDiscoveryRequest as a Delta stream receives it
// (the codec decodes into it): a subscription of many names, such as a
// proxy's first EDS request naming every cluster it sees, becomes one
// list shared by every stream that subscribed to the same names, before
// the request waits for the stream's loop. In a connect storm of 2,000
// Delta proxies the requests decoded and waiting held 53 MB of name
// slices, 2 s into the storm (issue #30: the daemon's peak RSS was 300
// MB against 200-230 MB for SotW, whose requests were already shared).
type DeltaRequest struct {
	discovery.DeltaDiscoveryRequest
	// Shared, set before the request is received, holds the shared lists.
	Shared *Lists
	// Subscribed is resource_names_subscribe, sorted and each name once,
	// as a shared list when the request named at least SharedFrom names
	// and not "*"; ResourceNamesSubscribe is then nil.
	Subscribed *NameList
}

// SharedFrom is how many subscribed names make a request's subscription
// a shared list (fewer: an incremental change, kept as sent).
const SharedFrom = 64

// Subscribe returns the names the request subscribes to, as sent or from
// its shared list; they must not be altered.
func (r *DeltaRequest) Subscribe() []string {
	if r.Subscribed != nil {
		return r.Subscribed.Names
	}
	return r.ResourceNamesSubscribe
}

func decodeSharedDelta(data mem.BufferSlice, r *DeltaRequest) error {
	r.Subscribed = nil
	if err := decodeDeltaRequest(data, &r.DeltaDiscoveryRequest); err != nil {
		return err
	}
	names := r.ResourceNamesSubscribe
	if r.Shared == nil || len(names) < SharedFrom || slices.Contains(names, "*") {
		return nil
	}
	slices.Sort(names) // the request's own slice
	names = slices.Compact(names)
	r.Subscribed = r.Shared.Get(NamesHash(names), names) // another stream's, or a copy
	r.ResourceNamesSubscribe = nil
	return nil
}
