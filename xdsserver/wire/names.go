package wire

import (
	"hash/maphash"
	"strings"
)

// namesSeed makes NamesHash and SetSum stable for the life of the process
// (hashes are compared, never stored).
var namesSeed = maphash.MakeSeed()

// NamesHash hashes a name list regardless of its order: the sum of the
// names' hashes, so a request's names are hashed as they are decoded,
// without sorting (decodeRequest).
func NamesHash(names []string) uint64 {
	var sum uint64
	for _, n := range names {
		sum += maphash.String(namesSeed, n)
	}
	return sum
}

// SetSum identifies a whole set (LDS, CDS) by its resources' content
// hashes, in order (a fast hash: it runs per proxy on every push).
func SetSum(res []*Resource) uint64 {
	var h maphash.Hash
	h.SetSeed(namesSeed)
	for _, r := range res {
		h.Write(r.Sum[:])
	}
	return h.Sum64()
}

// ClusterHost is the host of an "outbound|PORT|SUBSET|HOST" name (the
// text after the last '|') or of an AUTO_PASSTHROUGH gateway's
// "outbound_.PORT_.SUBSET_.HOST" (after the third "_."), without
// allocating: this runs for every subscribed cluster of every proxy on an
// endpoint push.
func ClusterHost(name string) string {
	if i := strings.LastIndexByte(name, '|'); i >= 0 {
		return name[i+1:]
	}
	rest, ok := strings.CutPrefix(name, "outbound_.")
	if !ok {
		return ""
	}
	for range 2 {
		i := strings.Index(rest, "_.")
		if i < 0 {
			return ""
		}
		rest = rest[i+2:]
	}
	return rest
}
