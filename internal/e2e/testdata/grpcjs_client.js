// @grpc/grpc-js-xds, an xDS client independent of grpc-go and C-core.
//
// Usage: NODE_PATH=.../node_modules node grpcjs_client.js TARGET
// Reads the bootstrap from GRPC_XDS_BOOTSTRAP and keeps one channel to
// TARGET (an xds:/// URI), so its xDS stream stays up between commands.
// Each line on stdin is a JSON command {"n": N, "header": "K=V",
// "wait": true}: with wait, first retry one RPC until it succeeds (20s at
// most); then make N health-check RPCs, one after another, and print one
// JSON line counting the backends that answered (each names itself in the
// "backend" response header) and the errors by status code. Exits when
// stdin closes.
'use strict';
const grpc = require('@grpc/grpc-js');
require('@grpc/grpc-js-xds').register();
const readline = require('readline');

const client = new grpc.Client(process.argv[2], grpc.credentials.createInsecure());
const empty = Buffer.alloc(0);
const same = (b) => b;

function check(md) {
  return new Promise((resolve) => {
    let backend = '?';
    const call = client.makeUnaryRequest('/grpc.health.v1.Health/Check', same, same, empty, md,
      { deadline: Date.now() + 5000 }, (err) => resolve(err ? { err: grpc.status[err.code] || String(err.code) } : { backend }));
    call.on('metadata', (m) => { const v = m.get('backend'); if (v.length) backend = String(v[0]); });
  });
}

async function run(cmd) {
  const md = new grpc.Metadata();
  if (cmd.header) {
    const i = cmd.header.indexOf('=');
    md.set(cmd.header.slice(0, i), cmd.header.slice(i + 1));
  }
  const out = { backends: {}, errors: {} };
  if (cmd.wait) {
    const deadline = Date.now() + 20000;
    for (;;) {
      const r = await check(md);
      if (!r.err) break;
      if (Date.now() > deadline) {
        out.error = 'no successful RPC in 20s: ' + r.err;
        return out;
      }
      await new Promise((res) => setTimeout(res, 100));
    }
  }
  for (let i = 0; i < (cmd.n || 0); i++) {
    const r = await check(md);
    if (r.err) out.errors[r.err] = (out.errors[r.err] || 0) + 1;
    else out.backends[r.backend] = (out.backends[r.backend] || 0) + 1;
  }
  return out;
}

const lines = readline.createInterface({ input: process.stdin });
let queue = Promise.resolve();
lines.on('line', (line) => {
  queue = queue.then(async () => {
    let out;
    try {
      out = await run(JSON.parse(line));
    } catch (e) {
      out = { error: String(e) };
    }
    process.stdout.write(JSON.stringify(out) + '\n');
  });
});
lines.on('close', () => queue.then(() => { client.close(); process.exit(0); }));
