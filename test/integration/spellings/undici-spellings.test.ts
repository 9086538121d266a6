/**
 * docs/design.md §4.1 "Spellings" through the in-process undici interceptor on a real engine and store:
 * address spellings and overrides are governed, lenient path spellings refused, nothing sent twice.
 */
import { Agent, type Dispatcher } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { openStore, type Store } from '../../../src/store/index.js';
import { gateInterceptor } from '../../../src/undici/index.js';
import { reply, startUpstream, type Upstream } from '../../helpers/upstream.js';
import { spellingPolicies } from './spelling-policies.js';

let store: Store;
let gate: Gate;
let upstream: Upstream;
let agent: Agent;
let runs = 0;

beforeAll(async () => {
  upstream = await startUpstream(reply(201, { ok: true }));
  store = await openStore({ url: 'pglite:memory' });
  gate = await createGate({
    policies: spellingPolicies(upstream.port),
    store,
    scope: { tenant: 'acme', area: 'support', agent: 'bot' },
  });
  agent = new Agent();
});

afterAll(async () => {
  await agent?.close();
  await gate?.close();
  await store?.close();
  await upstream?.close();
});

const inRun = (): Dispatcher => agent.compose(gateInterceptor(gate, { run: `u-${++runs}` }));
const seen = (fragment: string): number =>
  upstream.requests.filter((r) => r.body.toString().includes(fragment) || r.url.includes(fragment)).length;

async function send(
  origin: string,
  path: string,
  method: Dispatcher.HttpMethod,
  body: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; verdict: unknown; json: Record<string, unknown> }> {
  const res = await inRun().request({
    origin,
    path,
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
  const text = await res.body.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {}
  return { status: res.statusCode, verdict: res.headers['effectgate-verdict'], json };
}

describe('undici: spellings of a governed effect', () => {
  it('governs an IPv4-mapped origin as 127.0.0.1 and an address of localhost as localhost', async () => {
    const p = upstream.port;
    const body = JSON.stringify({ title: 'undici-ip' });
    expect((await send(`http://[::ffff:127.0.0.1]:${p}`, '/repos/a/b/issues', 'POST', body)).verdict).toBe(
      'allow',
    );
    expect((await send(`http://127.0.0.1:${p}`, '/repos/a/b/issues', 'POST', body)).status).toBe(409);
    expect((await send(`http://[::ffff:7f00:1]:${p}`, '/repos/a/b/issues', 'POST', body)).status).toBe(409);
    expect(seen('undici-ip')).toBe(1);

    const msg = JSON.stringify({ msg: 'undici-local' });
    expect((await send(`http://127.0.0.1:${p}`, '/send', 'POST', msg)).verdict).toBe('allow');
    expect((await send(`http://localhost:${p}`, '/send', 'POST', msg)).status).toBe(409);
    expect(seen('undici-local')).toBe(1);
  });

  it('refuses lenient path spellings 400 and sends nothing', async () => {
    for (const path of [
      '/Repos/a/b/issues',
      '/repos/a/b/issues;v=1',
      '/repos/a%2Fb/issues',
      '/repos//a/b/issues',
    ]) {
      const title = `undici-lenient ${path}`;
      const res = await send(`http://127.0.0.1:${upstream.port}`, path, 'POST', JSON.stringify({ title }));
      expect(res.status, path).toBe(400);
      expect(res.json, path).toMatchObject({ code: 'EG_ERR_AMBIGUOUS_ROUTE', tool: 't.create_issue' });
      expect(seen(title), path).toBe(0);
    }
  });

  it('classifies by a method override, and leaves ordinary requests alone', async () => {
    const origin = `http://127.0.0.1:${upstream.port}`;
    expect(
      (await send(origin, '/items/u-ov', 'POST', '', { 'x-http-method-override': 'DELETE' })).verdict,
    ).toBe('allow');
    expect((await send(origin, '/items/u-ov?_method=delete', 'POST', '')).status).toBe(409);
    const form = await send(origin, '/items/u-ov', 'POST', '_method=DELETE', {
      'content-type': 'application/x-www-form-urlencoded',
    });
    expect(form.status).toBe(409);
    expect(seen('/items/u-ov')).toBe(1);
    const plain = await send(origin, '/health', 'GET' as Dispatcher.HttpMethod, '');
    expect(plain.status).toBe(201);
    expect(plain.verdict).toBeUndefined();
  });
});
