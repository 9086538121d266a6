/**
 * A destination whose TLS certificate the gate does not trust (self-signed, no `--upstream-ca`),
 * reached through an intercepted HTTPS tunnel on a real loopback server: the agent is told that
 * nothing was sent, why a retry will not help yet and that `--upstream-ca` fixes it; a governed
 * attempt is a definite failure (`not_sent`, operation `failed`), never an unknown effect; the
 * operator gets one warning per host.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProxyAgent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadOperationReport } from '../../../src/admin/index.js';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import {
  CertificateAuthority,
  createProxyServer,
  initCertificateAuthority,
  type ProxyServer,
} from '../../../src/proxy/index.js';
import { openStore, type Store } from '../../../src/store/index.js';
import { reply, selfSignedCert, startUpstream, type Upstream } from '../../helpers/upstream.js';

let store: Store;
let upstream: Upstream;
let caDir: string;
let clientCa: string;
const gates: Gate[] = [];
const proxies: ProxyServer[] = [];
const agents: ProxyAgent[] = [];

beforeAll(async () => {
  upstream = await startUpstream(reply(201, { ok: true }), { tls: selfSignedCert() });
  store = await openStore({ url: 'pglite:memory' });
  caDir = mkdtempSync(join(tmpdir(), 'effectgate-upstream-tls-'));
  await initCertificateAuthority({ dir: caDir });
  clientCa = readFileSync(join(caDir, 'ca.pem'), 'utf8');
});
afterAll(async () => {
  for (const a of agents) await a.close();
  for (const p of proxies) await p.close();
  for (const g of gates) await g.close();
  await store?.close();
  await upstream?.close();
  rmSync(caDir, { recursive: true, force: true });
});

interface Answer {
  readonly status: number;
  readonly json: Record<string, unknown>;
}

/** A gate and proxy intercepting HTTPS to localhost; `upstreamCa` is `--upstream-ca`. */
async function start(area: string, upstreamCa?: string) {
  const policies = parsePolicyFiles([
    {
      file: 'tls.yaml',
      text: 'version: 1\ntools:\n  - id: t.create\n    match: { hosts: [localhost], method: POST, path: /items }\n    effect: create\n    dedupe: { key: [$.body.title], window: 1h, wait: 0s }\n',
    },
  ]);
  const gate = await createGate({ policies, store, scope: { tenant: 'acme', area, agent: 'bot' } });
  gates.push(gate);
  const warnings: { fields: Record<string, unknown>; message: string }[] = [];
  const proxy = createProxyServer({
    gate,
    ca: await CertificateAuthority.load(caDir),
    allowConnectPorts: [upstream.port],
    logger: { info() {}, error() {}, warn: (fields, message) => warnings.push({ fields, message }) },
    ...(upstreamCa === undefined ? {} : { upstream: { ca: upstreamCa } }),
  });
  proxies.push(proxy);
  const { port } = await proxy.listen('127.0.0.1', 0);
  const agent = new ProxyAgent({ uri: `http://127.0.0.1:${port}`, requestTls: { ca: clientCa } });
  agents.push(agent);
  const send = async (method: string, path: string, body?: unknown): Promise<Answer> => {
    const res = await request(`https://localhost:${upstream.port}${path}`, {
      dispatcher: agent,
      method,
      headers: { 'content-type': 'application/json', 'effectgate-run': `tls-${area}` },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.statusCode, json: (await res.body.json()) as Record<string, unknown> };
  };
  return { send, warnings };
}

describe('an upstream whose TLS certificate does not verify', () => {
  let gate: Awaited<ReturnType<typeof start>>;
  beforeAll(async () => {
    gate = await start('untrusted');
  });

  it('answers an ungoverned request 502 naming --upstream-ca, saying nothing was sent and why a retry fails', async () => {
    const before = upstream.requests.length;
    const r = await gate.send('GET', '/status');
    expect(r.status).toBe(502);
    expect(r.json).toMatchObject({
      type: 'urn:effectgate:problem:upstream_failed',
      status: 502,
      code: 'EG_ERR_UPSTREAM_FAILED',
      title: 'Upstream certificate not verified',
    });
    const detail = String(r.json['detail']);
    expect(detail).toContain('DEPTH_ZERO_SELF_SIGNED_CERT');
    expect(detail).toContain('--upstream-ca');
    expect(detail).toContain('No byte of the request was sent');
    expect(detail).toContain('fails the same way');
    expect(upstream.requests.length).toBe(before);
  });

  it('answers a governed one the same way and records a definite failure, not an unknown effect', async () => {
    const before = upstream.requests.length;
    for (const attempt of [1, 2]) {
      const r = await gate.send('POST', '/items', { title: 'Disk full' });
      expect(r.status, `attempt ${attempt}`).toBe(502);
      expect(r.json).toMatchObject({
        type: 'urn:effectgate:verdict:allow',
        code: 'EG_ERR_UPSTREAM_FAILED',
        dispatch_state: 'not_sent',
        operation_state: 'failed',
        title: 'Upstream certificate not verified',
      });
      const detail = String(r.json['detail']);
      expect(detail).toContain('--upstream-ca');
      expect(detail).toContain('repeating the call is safe, but it fails the same way');
      expect(detail).not.toContain('may have happened');
    }
    expect(upstream.requests.length).toBe(before);
    const operations = await store.listOperations({ toolId: 't.create', tenant: 'acme' });
    const mine = operations.filter((o) => o.scope.area === 'untrusted');
    expect(mine.map((o) => o.state)).toEqual(['failed']);
    const trail = await loadOperationReport(store, mine[0]!.id);
    expect(trail?.operation.attempts.map((a) => a.dispatchState)).toEqual(['not_sent', 'not_sent']);
    expect(await store.listOperations({ state: 'unknown' })).toEqual([]);
  });

  it('warns the operator once for the host, naming it and --upstream-ca', () => {
    const tls = gate.warnings.filter((w) => w.fields['error'] === 'DEPTH_ZERO_SELF_SIGNED_CERT');
    expect(tls).toHaveLength(1);
    expect(tls[0]!.fields['host']).toBe(`localhost:${upstream.port}`);
    expect(tls[0]!.message).toContain('--upstream-ca');
  });

  it('goes through once the gate trusts the CA (--upstream-ca)', async () => {
    const trusted = await start('trusted', selfSignedCert().cert);
    expect((await trusted.send('GET', '/status')).status).toBe(201);
    expect((await trusted.send('POST', '/items', { title: 'Disk full' })).status).toBe(201);
    expect(trusted.warnings).toEqual([]);
  });
});
