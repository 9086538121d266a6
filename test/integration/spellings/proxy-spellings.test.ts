/**
 * docs/design.md §4.1 "Spellings" through the real proxy, a real engine and store: every other spelling
 * of a governed effect is either governed (the second is a 409 duplicate) or refused 400, and a
 * second effect never reaches the destination; ordinary requests are unaffected.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { createProxyServer, type ProxyServer } from '../../../src/proxy/index.js';
import { openStore, type Store } from '../../../src/store/index.js';
import { reply, startUpstream, type Upstream } from '../../helpers/upstream.js';
import { rawProxyRequest } from '../proxy/harness.js';
import { spellingPolicies } from './spelling-policies.js';

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

interface Answer {
  readonly status: number;
  readonly verdict: unknown;
  readonly json: Record<string, unknown>;
}

async function send(
  target: string,
  method: string,
  body: string,
  run: string,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const res = await rawProxyRequest(
    proxyPort,
    target,
    { 'content-type': 'application/json', 'effectgate-run': run, ...headers },
    method,
    Buffer.from(body),
  );
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(res.body) as Record<string, unknown>;
  } catch {}
  return { status: res.status, verdict: res.headers['effectgate-verdict'], json };
}

const seen = (fragment: string): number =>
  upstream.requests.filter((r) => r.body.toString().includes(fragment) || r.url.includes(fragment)).length;
const newRun = (): string => `spell-${++runs}`;

describe('IP literal spellings are the canonical address', () => {
  const spellings = (p: number): string[] => [
    `http://[::ffff:127.0.0.1]:${p}`,
    `http://[::FFFF:7F00:1]:${p}`,
    `http://127.1:${p}`,
    `http://0x7f.0.0.1:${p}`,
    `http://2130706433:${p}`,
    `http://127.0.0.1.:${p}`,
  ];

  it('governs each spelling as 127.0.0.1: the canonical first, every other spelling a 409 duplicate', async () => {
    const run = newRun();
    const title = 'ip-spelling-1';
    const body = JSON.stringify({ title });
    const first = await send(`http://127.0.0.1:${upstream.port}/repos/a/b/issues`, 'POST', body, run);
    expect(first.status).toBe(201);
    expect(first.verdict).toBe('allow');
    for (const origin of spellings(upstream.port).slice(0, 3)) {
      const again = await send(`${origin}/repos/a/b/issues`, 'POST', body, run);
      expect(again.status, origin).toBe(409);
      expect(again.verdict, origin).toBe('duplicate');
    }
    expect(seen(title)).toBe(1);
  });

  it('governs a first effect sent by a mapped IPv6 address, and refuses its repeat by the plain address', async () => {
    for (const [i, origin] of spellings(upstream.port).entries()) {
      const run = newRun();
      const title = `ip-first-${i}`;
      const body = JSON.stringify({ title });
      const first = await send(`${origin}/repos/a/b/issues`, 'POST', body, run);
      expect(first.verdict, origin).toBe('allow');
      const again = await send(`http://127.0.0.1:${upstream.port}/repos/a/b/issues`, 'POST', body, run);
      expect(again.status, origin).toBe(409);
      expect(seen(title), origin).toBe(1);
    }
  });

  it('compiles an IPv4-mapped policy entry to the IPv4 address', async () => {
    const run = newRun();
    const first = await send(`http://127.0.0.1:${upstream.port}/items/ip-del-1`, 'DELETE', '', run);
    expect(first.verdict).toBe('allow');
    const again = await send(`http://[::ffff:7f00:1]:${upstream.port}/items/ip-del-1`, 'DELETE', '', run);
    expect(again.status).toBe(409);
    expect(seen('/items/ip-del-1')).toBe(1);
  });
});

describe('the unspecified address is refused, not another spelling of loopback', () => {
  // On Linux connect() to 0.0.0.0 reaches a listener on 127.0.0.1: the gate never connects to it.
  it('tool on 127.0.0.1: the same issue again via 0.0.0.0 is 403, never a second effect', async () => {
    const run = newRun();
    const p = upstream.port;
    const first = await send(
      `http://127.0.0.1:${p}/repos/acme/api/issues`,
      'POST',
      '{"title":"zero-a"}',
      run,
    );
    expect(first.status).toBe(201);
    const again = await send(`http://0.0.0.0:${p}/repos/acme/api/issues`, 'POST', '{"title":"zero-a"}', run);
    expect({ status: again.status, code: again.json['code'], reached: seen('zero-a') }).toEqual({
      status: 403,
      code: 'EG_ERR_DESTINATION_REFUSED',
      reached: 1,
    });
  });

  it('tool on localhost:port: the same message again via 0.0.0.0 never reaches it', async () => {
    const run = newRun();
    const p = upstream.port;
    expect((await send(`http://localhost:${p}/send`, 'POST', '{"msg":"zero-b"}', run)).status).toBe(201);
    await send(`http://0.0.0.0:${p}/send`, 'POST', '{"msg":"zero-b"}', run);
    expect(seen('zero-b')).toBe(1);
  });
});

describe('a governed host name is its addresses', () => {
  it('classifies a request to an address of localhost as localhost', async () => {
    const run = newRun();
    const body = JSON.stringify({ msg: 'by-address' });
    const first = await send(`http://127.0.0.1:${upstream.port}/send`, 'POST', body, run);
    expect(first.status).toBe(201);
    expect(first.verdict).toBe('allow');
    const again = await send(`http://localhost:${upstream.port}/send`, 'POST', body, run);
    expect(again.status).toBe(409);
    const third = await send(`http://[::ffff:127.0.0.1]:${upstream.port}/send`, 'POST', body, run);
    expect(third.status).toBe(409);
    expect(seen('by-address')).toBe(1);
  });

  it('decides CONNECT interception by host and port', async () => {
    const connect = (host: string, port: number): string =>
      gate.route({
        scheme: 'https',
        method: 'CONNECT',
        host,
        port,
        path: '/',
        query: '',
        headers: {},
        context: {
          run: null,
          step: null,
          operation: null,
          worker: null,
          agentVersion: null,
          retryReason: null,
        },
      }).kind;
    expect(connect('localhost', upstream.port)).toBe('govern');
    // localhost is 127.0.0.1, which a plain entry governs on every port: a name that resolves to
    // a governed address is that address.
    expect(connect('localhost', upstream.port + 1)).toBe('govern');
    // Another name on that port is looked up first (the proxy awaits prepare() for a CONNECT):
    // governed until its answer is in, then by what it resolved to (here nothing).
    expect(connect('localhost.invalid', upstream.port + 1)).toBe('govern');
    await gate.prepare('localhost.invalid', upstream.port + 1);
    expect(connect('localhost.invalid', upstream.port + 1)).toBe('pass');
    // A plain entry (127.0.0.1) governs every port.
    expect(connect('127.0.0.1', upstream.port + 1)).toBe('govern');
    await gate.prepare('example.org', 443);
    expect(connect('example.org', 443)).toBe('pass');
  });
});

describe('lenient readings of a governed route are refused', () => {
  const attacks = [
    '/repos/a/b\\issues',
    '/repos/a/b/%5Cissues',
    '/Repos/a/b/Issues',
    '/repos/a/b/issues;jsessionid=1',
    '/repos;x/a/b/issues',
    '/repos//a/b/issues',
    '/repos/a/b//issues',
    '/repos/a%2Fb/issues',
    '/repos/a/b/x\\..\\issues',
    '/repos/a/b/x%2F..%2Fissues',
  ];

  for (const path of attacks) {
    it(`refuses ${path} with 400 naming the tool, and sends nothing`, async () => {
      const title = `lenient ${path}`;
      const res = await send(
        `http://127.0.0.1:${upstream.port}${path}`,
        'POST',
        JSON.stringify({ title }),
        newRun(),
      );
      expect(res.status).toBe(400);
      expect(res.json).toMatchObject({
        type: 'urn:effectgate:problem:ambiguous_route',
        code: 'EG_ERR_AMBIGUOUS_ROUTE',
        tool: 't.create_issue',
      });
      expect(String(res.json['detail'])).toContain('POST 127.0.0.1 /repos/{owner}/{repo}/issues');
      expect(seen(title)).toBe(0);
    });
  }

  it('refuses a governed route whose captures a lenient server reads otherwise', async () => {
    const run = newRun();
    const first = await send(`http://127.0.0.1:${upstream.port}/items/cap-1`, 'DELETE', '', run);
    expect(first.verdict).toBe('allow');
    const again = await send(`http://127.0.0.1:${upstream.port}/items/cap-1;v=2`, 'DELETE', '', newRun());
    expect(again.status).toBe(400);
    expect(again.json).toMatchObject({ code: 'EG_ERR_AMBIGUOUS_ROUTE', tool: 't.delete_item' });
    expect(seen('/items/cap-1')).toBe(1);
  });

  it('leaves near misses on other methods and other hosts alone', async () => {
    const get = await send(`http://127.0.0.1:${upstream.port}/Repos/a/b/Issues`, 'GET', '', newRun());
    expect(get.status).toBe(201);
    expect(get.verdict).toBeUndefined();
    const other = await send(`http://127.0.0.1:${upstream.port}/repos/a/b/pulls`, 'POST', '{}', newRun());
    expect(other.status).toBe(201);
    expect(other.verdict).toBeUndefined();
    // The trailing slash is the same route, governed strictly.
    const slash = await send(
      `http://127.0.0.1:${upstream.port}/repos/a/b/issues/`,
      'POST',
      JSON.stringify({ title: 'trailing' }),
      newRun(),
    );
    expect(slash.verdict).toBe('allow');
  });
});

describe('method overrides are the method the request is classified by', () => {
  it('governs POST + override DELETE by the DELETE tool, by every override spelling', async () => {
    // Each repeat its own run: the loop breaker halts a run after repeated duplicates (429).
    const run = newRun;
    const url = `http://127.0.0.1:${upstream.port}/items/ov-1`;
    const first = await send(url, 'POST', '', run(), { 'x-http-method-override': 'DELETE' });
    expect(first.status).toBe(201);
    expect(first.verdict).toBe('allow');
    expect((await send(url, 'POST', '', run(), { 'x-http-method': 'delete' })).status).toBe(409);
    expect((await send(url, 'POST', '', run(), { 'x-method-override': 'DELETE' })).status).toBe(409);
    expect((await send(`${url}?_method=DELETE`, 'POST', '', run())).status).toBe(409);
    const form = await send(url, 'POST', '_method=DELETE', run(), {
      'content-type': 'application/x-www-form-urlencoded',
    });
    expect(form.status).toBe(409);
    expect((await send(url, 'DELETE', '', run())).status).toBe(409);
    expect(seen('/items/ov-1')).toBe(1);
  });

  it('classifies by the real method when the override names a method no tool governs', async () => {
    const title = 'override-patch';
    const res = await send(
      `http://127.0.0.1:${upstream.port}/repos/a/b/issues`,
      'POST',
      JSON.stringify({ title }),
      newRun(),
      { 'x-http-method-override': 'PATCH' },
    );
    expect(res.verdict).toBe('allow');
    const plain = await send(`http://127.0.0.1:${upstream.port}/items/plain`, 'POST', '', newRun(), {
      'x-http-method-override': 'PUT',
    });
    expect(plain.status).toBe(201);
    expect(plain.verdict).toBeUndefined();
    const form = await send(`http://127.0.0.1:${upstream.port}/items/plain-form`, 'POST', 'a=1', newRun(), {
      'content-type': 'application/x-www-form-urlencoded',
    });
    expect(form.status).toBe(201);
    expect(form.verdict).toBeUndefined();
  });
});
