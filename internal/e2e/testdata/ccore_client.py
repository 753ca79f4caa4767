#!/usr/bin/python3
"""gRPC C-core (Debian's python3-grpcio) as an xDS client.

Usage: ccore_client.py TARGET N [HEADER=VALUE]
Reads the bootstrap from GRPC_XDS_BOOTSTRAP, makes N health-check RPCs to
TARGET (an xds:/// URI) and prints a JSON object counting the backends
that answered (each names itself in the "backend" response header) and
the errors.
"""
import json
import sys
import time

import grpc

target, n = sys.argv[1], int(sys.argv[2])
md = ()
if len(sys.argv) > 3:
    k, v = sys.argv[3].split("=", 1)
    md = ((k, v),)
counts = {}
errors = {}
with grpc.insecure_channel(target) as ch:
    check = ch.unary_unary("/grpc.health.v1.Health/Check")
    # Wait for the first success: xDS config arrives asynchronously.
    deadline = time.time() + 20
    while True:
        try:
            check(b"", timeout=5, metadata=md)
            break
        except grpc.RpcError as e:
            if time.time() > deadline:
                print(json.dumps({"error": "no successful RPC in 20s: %s" % e}))
                sys.exit(1)
            time.sleep(0.1)
    for _ in range(n):
        try:
            _, call = check.with_call(b"", timeout=5, metadata=md)
            b = dict(call.initial_metadata()).get("backend", "?")
            counts[b] = counts.get(b, 0) + 1
        except grpc.RpcError as e:
            errors[str(e.code())] = errors.get(str(e.code()), 0) + 1
print(json.dumps({"backends": counts, "errors": errors}))
