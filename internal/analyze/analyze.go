// Package analyze finds cross-resource problems in a set of Istio
// resources, as `istioctl analyze` does, with Istio's message codes
// (pkg/config/analysis/msg/messages.yaml) where Istio has one. It is pure:
// it takes the resources (each with its file and line) and returns
// messages, with no I/O. Loading is the caller's (internal/ctl reads
// directories with sources/file's parser, or a daemon's /debug/configz).
//
// It imports core/config, core/model (the annotations it reads) and
// istio.io/api only.
package analyze

import (
	"fmt"
	"sort"
	"strings"

	"github.com/baremesh/baremesh/core/config"
)

// Level is a message's severity, Istio's three.
type Level int

const (
	Info Level = iota
	Warning
	Error
)

func (l Level) String() string { return [...]string{"Info", "Warning", "Error"}[l] }

// ParseLevel reads "info", "warning" or "error".
func ParseLevel(s string) (Level, error) {
	switch strings.ToLower(s) {
	case "info":
		return Info, nil
	case "warning", "warn":
		return Warning, nil
	case "error":
		return Error, nil
	}
	return Error, fmt.Errorf("unknown level %q (info, warning or error)", s)
}

// Code is one kind of message. Codes IST* are Istio's, with Istio's name,
// level and wording; BM* are baremesh's own where Istio has none.
type Code struct {
	ID, Name string
	Level    Level
}

var (
	ReferencedResourceNotFound          = Code{"IST0101", "ReferencedResourceNotFound", Error}
	ConflictingSidecarWorkloadSelectors = Code{"IST0110", "ConflictingSidecarWorkloadSelectors", Error}
	MultipleSidecarsWithoutSelectors    = Code{"IST0111", "MultipleSidecarsWithoutWorkloadSelectors", Error}
	PortNameIsNotUnderNamingConvention  = Code{"IST0118", "PortNameIsNotUnderNamingConvention", Info}
	InvalidAnnotation                   = Code{"IST0125", "InvalidAnnotation", Warning}
	NoMatchingWorkloadsFound            = Code{"IST0127", "NoMatchingWorkloadsFound", Warning}
	// GatewayWithoutVirtualService: Istio has no code; a Gateway that no
	// VirtualService binds serves listeners that answer 404 to everything.
	GatewayWithoutVirtualService = Code{"BM0001", "GatewayWithoutVirtualService", Warning}
	// FieldNotSupported: Istio has no code; a field istiod honours that
	// baremeshd reads but does not act on, so the config does less than
	// its author meant.
	FieldNotSupported = Code{"BM0006", "FieldNotSupported", Warning}
)

// Message is one finding about one resource.
type Message struct {
	Code     Code
	Resource config.Key
	Source   config.Source
	Text     string
}

// String is istioctl analyze's line: Error [IST0101] (VirtualService
// ns/name file:line) text.
func (m Message) String() string {
	where := ""
	if m.Source.File != "" {
		where = fmt.Sprintf(" %s:%d", m.Source.File, m.Source.Line)
	}
	return fmt.Sprintf("%s [%s] (%s %s/%s%s) %s", m.Code.Level, m.Code.ID, m.Resource.Kind, m.Resource.Namespace, m.Resource.Name, where, m.Text)
}

// analyzer is one check over the indexed resources.
type analyzer struct {
	name string
	run  func(ix *index) []Message
}

// analyzers is every check; adding one is one entry.
var analyzers = []analyzer{
	{"virtualservice.destinations", vsDestinations},
	{"virtualservice.gateways", vsGateways},
	{"selector.workloads", selectorsMatchWorkloads},
	{"authorizationpolicy.dryrun", authzDryRun},
	{"serviceentry.trafficdistribution", trafficDistribution},
	{"fields.unsupported", unsupportedFields},
	{"sidecar.conflicts", sidecarConflicts},
	{"gateway.virtualservices", gatewaysWithoutVS},
	{"serviceentry.portnames", portNames},
	{"gatewayapi", gatewayAPI},
}

// Analyze returns every message about cfgs, sorted by file, line and code.
func Analyze(cfgs []config.Config) []Message {
	ix := newIndex(cfgs)
	var out []Message
	for _, a := range analyzers {
		out = append(out, a.run(ix)...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Source.File != b.Source.File {
			return a.Source.File < b.Source.File
		}
		if a.Source.Line != b.Source.Line {
			return a.Source.Line < b.Source.Line
		}
		if a.Code.ID != b.Code.ID {
			return a.Code.ID < b.Code.ID
		}
		return a.Text < b.Text
	})
	return out
}

func msg(c *config.Config, code Code, format string, args ...any) Message {
	return Message{Code: code, Resource: c.Key(), Source: c.Source, Text: fmt.Sprintf(format, args...)}
}

// notFound is IST0101's text: Referenced %s not found: %q.
func notFound(c *config.Config, reftype, name string) Message {
	return msg(c, ReferencedResourceNotFound, "Referenced %s not found: %q", reftype, name)
}
