package rds

// serviceA and serviceB are the plain HTTP services the route tests
// route to, in namespace ns: a.ns.svc.cluster.local and
// b.ns.svc.cluster.local, port 80, one static endpoint each (10.0.0.1,
// 10.0.0.2). Each is a YAML document of its own, for gentest.MustBuild.
const (
	serviceA = `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: a, namespace: ns}
spec:
  hosts: [a.ns.svc.cluster.local]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.1}]
`
	serviceB = `
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: b, namespace: ns}
spec:
  hosts: [b.ns.svc.cluster.local]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.2}]
`
)
