/**
 * The unspecified address is another spelling of this machine (issue 10 review): on Linux
 * connect() to `0.0.0.0` reaches a listener on 127.0.0.1, so a tool on `127.0.0.1` or `localhost`
 * would be walked past by `http://0.0.0.0:port/…`. The gate refuses `0.0.0.0` and `::` (403
 * EG_ERR_DESTINATION_REFUSED) and never connects to them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { createProxyServer, type ProxyServer } from '../../../src/proxy/index.js';
import { openStore, type Store } from '../../../src/store/index.js';
import { reply, startUpstream, type Upstream } from '../../helpers/upstream.js';
import { spellingPolicies } from '../spellings/spelling-policies.js';
import { rawProxyRequest } from './harness.js';

let store: Store;
let gate: Gate;
let upstream: Upstream;
let proxy: ProxyServer;
let proxyPort: number;
let runs = 0;

beforeAll(async () => {
  upstream = await startUpstream(reply(201, { ok: true }));
  store = await openStore({ url: 'pglite:memory' });
  gate = await createGate({
    policies: spellingPolicies(upstream.port),
    store,
    scope: { tenant: 'acme', area: 'support', agent: 'bot' },
  });
  proxy = createProxyServer({ gate });
  proxyPort = (await proxy.listen('127.0.0.1', 0)).port;
});
afterAll(async () => {
  await proxy?.close();
  await gate?.close();
  await store?.close();
  await upstream?.close();
});

const send = (target: string, body: string) =>
  rawProxyRequest(
    proxyPort,
    target,
    { 'content-type': 'application/json', 'effectgate-run': `zero-${++runs}` },
    'POST',
    Buffer.from(body),
  );
const seen = (fragment: string): number =>
  upstream.requests.filter((r) => r.body.toString().includes(fragment)).length;

describe('0.0.0.0 reaches the loopback listener a tool governs', () => {
  it('tool on 127.0.0.1: the same issue twice via 0.0.0.0', async () => {
    const p = upstream.port;
    const first = await send(`http://127.0.0.1:${p}/repos/acme/api/issues`, '{"title":"zero-a"}');
    expect(first.status).toBe(201);
    const again = await send(`http://0.0.0.0:${p}/repos/acme/api/issues`, '{"title":"zero-a"}');
    // Refused: the gate never connects to the unspecified address.
    expect({ status: again.status, reached: seen('zero-a') }).toEqual({ status: 403, reached: 1 });
  });

  it('tool on localhost:port: the same message twice via 0.0.0.0', async () => {
    const p = upstream.port;
    const first = await send(`http://localhost:${p}/send`, '{"msg":"zero-b"}');
    expect(first.status).toBe(201);
    await send(`http://0.0.0.0:${p}/send`, '{"msg":"zero-b"}');
    expect(seen('zero-b')).toBe(1);
  });
});
