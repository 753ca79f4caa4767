package gentest

// EastWestConfig is an east-west gateway's: AUTO_PASSTHROUGH on 15443
// for *.fleet.internal, a service there with two subsets, a service
// elsewhere and a mesh-external one under the server's hosts. The
// generators' tests of AUTO_PASSTHROUGH share it.
const EastWestConfig = `apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: cross-network, namespace: istio-system}
spec:
  selector: {istio: eastwestgateway}
  servers:
  - port: {number: 15443, name: tls, protocol: TLS}
    tls: {mode: AUTO_PASSTHROUGH}
    hosts: ["*.fleet.internal"]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: inventory, namespace: default}
spec:
  hosts: [inventory.fleet.internal]
  location: MESH_INTERNAL
  ports: [{number: 5432, name: tcp-pg, protocol: TCP}]
  resolution: STATIC
  endpoints:
  - {address: 10.0.40.1, labels: {version: v1, security.istio.io/tlsMode: istio}}
  - {address: 10.0.40.2, labels: {version: v1}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: inventory, namespace: default}
spec:
  host: inventory.fleet.internal
  subsets: [{name: v1, labels: {version: v1}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: other, namespace: default}
spec:
  hosts: [other.example.com]
  location: MESH_INTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.41.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: saas, namespace: default}
spec:
  hosts: [saas.fleet.internal]
  location: MESH_EXTERNAL
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: DNS
`
