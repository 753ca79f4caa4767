// Package parity is the differential harness of issue #25: istiod is the
// oracle of meaning. The same configuration and the same proxies go to
// Istio's real istiod (pilot-discovery) and to baremeshd, and what each
// sends is compared resource by resource; every difference must be equal
// after normalization, or listed in catalog.yaml, as deliberate (with what
// we do instead and why it is safe) or as open (a bug not fixed yet,
// counted apart; the target is none open).
//
// # How istiod gets the config
//
// Each scenario's YAML is applied as custom resources to a test
// kube-apiserver (envtest, Istio's CRDs) that istiod watches, with a
// dynamic client and unstructured objects (option (a) of the issue), and
// baremeshd reads the same documents from a config directory. istiod does
// not read baremesh's MCP output, so a bug in our ingestion or in our MCP
// server cannot hide itself by feeding the oracle the same mistake. The
// price is istiod's Kubernetes registry: the API server's own `kubernetes`
// Service becomes clusters and listeners that baremesh (no Kubernetes
// source here) has not; the catalog lists that as the environment. A
// scenario is in force in istiod when /debug/configz holds every document
// at its applied resource version and nothing of the previous scenario.
// baremeshd runs in-process, a fresh daemon per scenario; both use Istio's
// default mesh config.
//
// # Proxies
//
// testdata/proxies.yaml describes proxies as Istio's agent does in its node
// metadata (VM sidecar with REDIRECT, TPROXY sidecar, ingress gateway, a
// router that is not east-west, proxyless gRPC client and server, Istio's
// benchmark proxy). A small SotW ADS client (client.go) subscribes as Envoy
// does (CDS and LDS wildcard, then RDS names from the listeners' HTTP
// connection managers and EDS names from EDS clusters) or as gRPC does (LDS
// by name, then RDS, CDS, EDS by the names that arrive), ACKs everything
// and stops when no response has arrived for a quiet second.
//
// # Normalization (the whole of it)
//
//  1. Each resource becomes protojson with proto field names and every Any
//     expanded through the global registry (types.go imports the Envoy
//     extensions and the Istio-only configs istio.io/api ships: istio.stats,
//     metadata exchange, istio.alpn; istiod's TypedStruct peer metadata
//     configs are compared field by field). An Any of a type neither has is
//     shown by its @type only; the report lists those URLs.
//  2. The JSON becomes a tree, so field order in the encoding is gone.
//  3. (Nothing: istio-proxy's telemetry, its filters, access logs, tracing,
//     stat names and filter_metadata.istio, is compared like the rest
//     since #27.)
//  4. An RBAC principal or permission that is an and/or set of exactly one
//     element (and_ids, or_ids, and_rules, or_rules) is replaced by that
//     element, recursively, and the elements of larger sets are sorted:
//     Envoy evaluates both alike (AND and OR do not depend on order), and
//     istiod wraps every rule part where our generator writes the part
//     itself.
//  5. A certificate validation context's deprecated match_subject_alt_names
//     (istiod's form) becomes match_typed_subject_alt_names (ours): a
//     "spiffe://" value a URI SAN, any other a DNS SAN (the typed form is
//     at least as strict). Then a context whose matchers one side lacks is
//     reported (a catalog entry that took either field as deliberate hid
//     inbound mTLS without istiod's trust-domain check until it went).
//
// Nothing else is removed: any other difference is reported.
//
// # Differences
//
// Resources are matched by type and name; a resource one side lacks is one
// difference at "type/name". Inside, list elements are matched by name
// ([name=X]) when every element has a distinct one, by filter_chain_match
// ([match={...}]) for filter chains, EDS locality groups by locality and
// priority, endpoints by address, lists of distinct strings as sets
// (domains, SANs: [=value]), else by index, and a difference is
// reported per leaf, e.g.
// "lds/virtualInbound/filter_chains[name=X].filters[name=Y].typed_config.stat_prefix".
//
// It imports internal/daemon (in tests) and external modules; nothing
// imports it.
package parity
