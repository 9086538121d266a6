/**
 * The CLI's pino logger: JSON lines, level from EFFECTGATE_LOG_LEVEL, credentials censored; and the
 * engine in process (real PGlite store, real loopback upstream) logging exactly one line per
 * governed decision, with no secret from the request in any line.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/cli/logger.js';
import { createGate, type Gate } from '../../../src/engine/index.js';
import type { GateRequest } from '../../../src/engine/types.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { createUpstreamClient, type UpstreamClient } from '../../../src/proxy/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { commitThenDestroy, reply, startUpstream, type Upstream } from '../../helpers/upstream.js';

/** A pino destination in memory: one parsed object per line. */
function memory(): { write(line: string): void; lines: Record<string, unknown>[]; raw: string[] } {
  const raw: string[] = [];
  const lines: Record<string, unknown>[] = [];
  return {
    raw,
    lines,
    write(chunk: string) {
      for (const line of chunk.split('\n')) {
        if (line === '') continue;
        raw.push(line);
        lines.push(JSON.parse(line) as Record<string, unknown>);
      }
    },
  };
}

describe('createLogger', () => {
  it('writes one JSON object per line with an ISO time, a level name and the message', () => {
    const out = memory();
    const logger = createLogger({ destination: out });
    logger.info({ tool: 'gh.create_issue', verdict: 'allow' }, 'governed decision');
    expect(out.lines).toHaveLength(1);
    const line = out.lines[0]!;
    expect(line).toMatchObject({ level: 'info', msg: 'governed decision', tool: 'gh.create_issue' });
    expect(new Date(line['time'] as string).toISOString()).toBe(line['time']);
  });

  it('takes its level from the option, and falls back to info, saying so, on an unknown one', () => {
    const quiet = memory();
    const warnOnly = createLogger({ level: 'warn', destination: quiet });
    warnOnly.info({}, 'not written');
    warnOnly.warn({}, 'written');
    expect(quiet.lines.map((l) => l['msg'])).toEqual(['written']);

    const out = memory();
    const fallback = createLogger({ level: 'loud', destination: out });
    fallback.debug({}, 'not written');
    fallback.info({}, 'written');
    expect(out.lines.map((l) => [l['level'], l['msg']])).toEqual([
      ['warn', 'unknown EFFECTGATE_LOG_LEVEL; logging at info'],
      ['info', 'written'],
    ]);
  });

  it('censors credentials at the top level, one level down and under nested headers', () => {
    const out = memory();
    const logger = createLogger({ destination: out });
    logger.error(
      {
        authorization: 'Bearer top-SECRET',
        'proxy-authorization': 'Basic proxy-SECRET',
        cookie: 'sid=cookie-SECRET',
        headers: { authorization: 'Bearer h-SECRET', 'set-cookie': 'sid=set-SECRET', accept: 'json' },
        err: { token: 'err-SECRET', message: 'kept' },
        req: { headers: { 'x-api-key': 'key-SECRET', 'proxy-authorization': 'nested-SECRET' } },
      },
      'failure',
    );
    expect(out.raw[0]).not.toMatch(/SECRET/);
    expect(out.lines[0]).toMatchObject({
      authorization: '[redacted]',
      'proxy-authorization': '[redacted]',
      headers: { authorization: '[redacted]', 'set-cookie': '[redacted]', accept: 'json' },
      err: { token: '[redacted]', message: 'kept' },
      req: { headers: { 'x-api-key': '[redacted]', 'proxy-authorization': '[redacted]' } },
    });
  });
});

const policies = parsePolicyFiles([
  {
    file: 'inline.yaml',
    text: `
version: 1
tools:
  - id: t.create
    match: { hosts: [127.0.0.1], method: POST, path: "/items" }
    effect: create
    dedupe: { key: [$.body.name], window: 1h, wait: 0s }
    idempotency: { header: Idempotency-Key }
    redact: [$.body.token]
  - id: t.lost
    match: { hosts: [127.0.0.1], method: POST, path: "/lost" }
    effect: create
    dedupe: { key: [$.body.name], window: 1h, wait: 0s }
  - id: t.recon
    match: { hosts: [127.0.0.1], method: POST, path: "/recon" }
    effect: create
    dedupe: { key: [$.body.name], window: 1h, wait: 0s }
    reconcile: { method: GET, path: /recon, items: "$[*]", match: { $.name: $.body.name } }
`,
  },
]);

const SECRETS = ['sk-live-7f3a9c2e', 'session=0b1c2d3e', 'tok-4e5f6a7b'];

function post(upstream: Upstream, path: string, body: Record<string, unknown>, run: string): GateRequest {
  return {
    scheme: 'http',
    method: 'POST',
    host: '127.0.0.1',
    port: upstream.port,
    path,
    query: '',
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${SECRETS[0]}`,
      cookie: SECRETS[1]!,
    },
    body: new TextEncoder().encode(JSON.stringify(body)),
    context: { run, step: null, operation: null, worker: null, agentVersion: null, retryReason: null },
  };
}

// The log lines do not depend on the store: PGlite only.
const [target] = storeTargets();

describe('the engine with the pino logger', () => {
  let store: TestStore;
  let upstream: Upstream;
  let client: UpstreamClient;
  let gate: Gate;
  const out = memory();

  beforeAll(async () => {
    store = await openTestStore(target!);
    upstream = await startUpstream((req, res, raw) => {
      if (req.method === 'POST' && (req.url === '/lost' || req.url === '/recon'))
        return commitThenDestroy()(req, res, raw);
      if (req.url === '/recon') return reply(200, [{ name: 'recon-1' }])(req, res, raw);
      return reply(201, { id: 1 })(req, res, raw);
    });
    client = createUpstreamClient();
    gate = await createGate({
      policies,
      store,
      scope: { tenant: 'acme', area: 'support', agent: 'bot' },
      logger: createLogger({ level: 'debug', destination: out }),
    });
  });
  afterAll(async () => {
    await client?.close();
    await upstream?.close();
    await store?.close();
  });

  /** Runs one request and returns the decision lines it logged. */
  async function decide(request: GateRequest, status: number): Promise<Record<string, unknown>[]> {
    const before = out.lines.length;
    const res = await gate.handle(request, client.send);
    expect(res.status).toBe(status);
    return out.lines.slice(before).filter((l) => l['msg'] === 'governed decision');
  }

  it('logs exactly one line per governed decision, whatever the verdict', async () => {
    const secretBody = { name: 'item-1', token: SECRETS[2] };
    const [allow] = await decide(post(upstream, '/items', secretBody, 'run-a'), 201).then(one);
    expect(allow).toMatchObject({ level: 'info', verdict: 'allow', tool: 't.create', run: 'run-a' });
    expect(allow!['operation']).toMatch(/^[0-9a-f-]{36}$/);
    expect(allow!['attempt']).toMatch(/^[0-9a-f-]{36}$/);

    const [dup] = await decide(post(upstream, '/items', secretBody, 'run-b'), 409).then(one);
    expect(dup).toMatchObject({ verdict: 'duplicate', tool: 't.create', run: 'run-b', attempt: null });
    expect(dup!['operation']).toBe(allow!['operation']);

    const [block] = await decide(post(upstream, '/items', { title: 'no name' }, 'run-b'), 422).then(one);
    expect(block).toMatchObject({ verdict: 'block', tool: 't.create', operation: null, attempt: null });

    const [lost] = await decide(post(upstream, '/lost', { name: 'lost-1' }, 'run-a'), 502).then(one);
    expect(lost).toMatchObject({ verdict: 'allow', tool: 't.lost', state: 'unknown' });
    const [hold] = await decide(post(upstream, '/lost', { name: 'lost-1' }, 'run-b'), 428).then(one);
    expect(hold).toMatchObject({
      verdict: 'hold',
      tool: 't.lost',
      run: 'run-b',
      operation: lost!['operation'],
      attempt: null,
      previous_attempt: lost!['attempt'],
      reconciliation: null,
    });

    await decide(post(upstream, '/recon', { name: 'recon-1' }, 'run-a'), 502).then(one);
    const [settled] = await decide(post(upstream, '/recon', { name: 'recon-1' }, 'run-b'), 409).then(one);
    expect(settled).toMatchObject({ verdict: 'duplicate', tool: 't.recon', reconciliation: 'match' });
  });

  it('never writes the Authorization header, the cookie or a secret body field', () => {
    expect(out.lines.length).toBeGreaterThan(0);
    const all = out.raw.join('\n');
    for (const secret of SECRETS) expect(all).not.toContain(secret);
    expect(all).not.toMatch(/authorization|cookie/i);
  });
});

function one(lines: Record<string, unknown>[]): Record<string, unknown>[] {
  expect(lines, JSON.stringify(lines)).toHaveLength(1);
  return lines;
}
