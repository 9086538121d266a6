/**
 * The governed path end to end: the real `effectgate proxy` binary, a real loopback upstream, real
 * clients (undici through ProxyAgent in absolute-form, curl -x), and a real store — embedded
 * PGlite always, PostgreSQL when DATABASE_URL is set.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ProxyAgent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ProxyProcess, runCli, startProxyProcess } from '../helpers/proxy-process.js';
import { openTestStore, storeTargets, type TestStore } from '../helpers/store.js';
import {
  commitThenDestroy,
  delay,
  type RecordedRequest,
  reply,
  startUpstream,
  type Upstream,
  type UpstreamHandler,
} from '../helpers/upstream.js';

const POLICIES = new URL('../fixtures/e2e-policies/', import.meta.url).pathname;
const BLOCK_POLICIES = new URL('../fixtures/e2e-policies-block/', import.meta.url).pathname;
const execFileP = promisify(execFile);

/** Upstream that behaves by title: `fail4xx` → 422, `fail5xx` → 503, `slow` → 1.2 s, else 201. */
function issuesApi(): UpstreamHandler {
  let n = 0;
  return (req, res, raw) => {
    if (!req.url.includes('/issues')) return reply(200, { ok: true })(req, res, raw);
    const title = String((JSON.parse(req.body.toString() || '{}') as { title?: string }).title ?? '');
    if (title.includes('fail4xx')) return reply(422, { message: 'Validation Failed' })(req, res, raw);
    if (title.includes('fail5xx')) return reply(503, { message: 'Service Unavailable' })(req, res, raw);
    if (title.includes('reset')) return commitThenDestroy()(req, res, raw);
    n += 1;
    const created = reply(201, {
      number: n,
      html_url: `https://issues.example.test${req.url.split('?')[0]}/${n}`,
    });
    if (title.includes('slow')) return delay(1200, created)(req, res, raw);
    return created(req, res, raw);
  };
}

interface Sent {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  json: Record<string, unknown>;
}

for (const target of storeTargets()) {
  describe(`governed path through the proxy (${target.name})`, () => {
    let upstream: Upstream;
    let proxy: ProxyProcess;
    let agent: ProxyAgent;
    let pgStore: TestStore | null = null;
    let storeUrl: string;
    let dir: string;
    let failedOnce = '';

    beforeAll(async () => {
      upstream = await startUpstream(issuesApi());
      dir = mkdtempSync(join(tmpdir(), 'effectgate-e2e-'));
      if (target.kind === 'postgres') {
        pgStore = await openTestStore(target);
        storeUrl = pgStore.url;
      } else {
        storeUrl = `pglite:${join(dir, 'store')}`;
      }
      proxy = await startProxyProcess([
        '--policies',
        POLICIES,
        '--store',
        storeUrl,
        '--tenant',
        'acme',
        '--area',
        'support',
        '--agent',
        'triage-bot',
      ]);
      // proxyTunnel: false sends plain-HTTP targets in absolute form, as curl and Python do.
      agent = new ProxyAgent({ uri: proxy.url, proxyTunnel: false });
    });

    afterAll(async () => {
      await agent?.close();
      await proxy?.stop();
      await upstream?.close();
      await pgStore?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    const issuesOf = (title: string): RecordedRequest[] =>
      upstream.requests.filter((r) => r.url.includes('/issues') && r.body.toString().includes(`"${title}"`));

    async function createIssue(
      body: Record<string, unknown>,
      headers: Record<string, string> = {},
      repo = 'api',
    ): Promise<Sent> {
      const res = await request(`${upstream.url}/repos/acme/${repo}/issues`, {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });
      const text = await res.body.text();
      return {
        status: res.statusCode,
        headers: res.headers,
        json: text ? (JSON.parse(text) as Record<string, unknown>) : {},
      };
    }

    it('allows the first create, injects the operation id as Idempotency-Key, strips gate headers', async () => {
      const r = await createIssue(
        { title: 'Disk full on db-1', trace_id: 't1', token: 'hunter2' },
        { 'effectgate-run': 'run-a', 'effectgate-step': 'step-1', authorization: 'Bearer sk-live-123' },
      );
      expect(r.status).toBe(201);
      expect(r.headers['effectgate-verdict']).toBe('allow');
      const op = r.headers['effectgate-operation'];
      expect(op).toMatch(/^[0-9a-f-]{36}$/);
      expect(r.headers['effectgate-attempt']).toMatch(/^[0-9a-f-]{36}$/);
      expect(r.headers['effectgate-decision']).toMatch(/^[0-9a-f-]{36}$/);
      const seen = issuesOf('Disk full on db-1');
      expect(seen).toHaveLength(1);
      expect(seen[0]!.headers['idempotency-key']).toBe(op);
      expect(seen[0]!.headers['authorization']).toBe('Bearer sk-live-123');
      expect(
        Object.keys(seen[0]!.headers).filter((h) => h.startsWith('effectgate-') || h.startsWith('proxy-')),
      ).toEqual([]);
    });

    it('answers an identical proposal from another run as a duplicate pointing at the source run', async () => {
      const first = await createIssue(
        { title: 'Pager for api-7', trace_id: 'x' },
        { 'effectgate-run': 'run-b', 'effectgate-step': 'open-incident' },
      );
      expect(first.status).toBe(201);
      // Same semantic key, different volatile field and run: still the same effect.
      const second = await createIssue(
        { title: 'Pager for api-7', trace_id: 'y' },
        { 'effectgate-run': 'run-c' },
      );
      expect(second.status).toBe(409);
      expect(second.headers['content-type']).toBe('application/problem+json');
      expect(second.headers['effectgate-verdict']).toBe('duplicate');
      expect(second.headers['effectgate-operation']).toBe(first.headers['effectgate-operation']);
      expect(second.headers['effectgate-attempt']).toBeUndefined();
      expect(second.json).toMatchObject({
        type: 'urn:effectgate:verdict:duplicate',
        status: 409,
        verdict: 'duplicate',
        tool: 'test.create_issue',
        operation_id: first.headers['effectgate-operation'],
        source: {
          run_id: 'run-b',
          step: 'open-incident',
          operation_id: first.headers['effectgate-operation'],
          attempt_id: first.headers['effectgate-attempt'],
          destination_ref: expect.stringMatching(
            /^https:\/\/issues\.example\.test\/repos\/acme\/api\/issues\/\d+$/,
          ),
        },
      });
      expect(second.json['message']).toBe(second.json['detail']);
      expect(String(second.json['detail'])).toContain('run-b');
      expect(issuesOf('Pager for api-7')).toHaveLength(1);
    });

    it('keeps the key per repository: the same title in another repo is a new effect', async () => {
      expect((await createIssue({ title: 'Shared title' })).status).toBe(201);
      expect((await createIssue({ title: 'Shared title' }, {}, 'web')).status).toBe(201);
      expect(issuesOf('Shared title')).toHaveLength(2);
    });

    it('sends the verdict as application/json when Accept excludes problem+json', async () => {
      await createIssue({ title: 'Accept check' });
      const r = await createIssue({ title: 'Accept check' }, { accept: 'application/json' });
      expect(r.status).toBe(409);
      expect(r.headers['content-type']).toBe('application/json');
      expect(r.json['verdict']).toBe('duplicate');
    });

    it('blocks (422) a proposal whose declared key path is missing, sending nothing', async () => {
      const before = upstream.requests.length;
      const r = await createIssue({ body: 'no title here' });
      expect(r.status).toBe(422);
      expect(r.json).toMatchObject({
        verdict: 'block',
        reason: 'key_path_missing',
        missing: ['$.body.title'],
      });
      expect(r.headers['effectgate-operation']).toBeUndefined();
      expect(upstream.requests.length).toBe(before);
    });

    it('halts a run after max_duplicate_skips duplicates (409 ×3, then 429 for every governed call)', async () => {
      expect((await createIssue({ title: 'Loop me' }, { 'effectgate-run': 'looper-src' })).status).toBe(201);
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++)
        statuses.push((await createIssue({ title: 'Loop me' }, { 'effectgate-run': 'looper' })).status);
      expect(statuses).toEqual([409, 409, 409, 429]);
      const fresh = await createIssue({ title: 'A brand new effect' }, { 'effectgate-run': 'looper' });
      expect(fresh.status).toBe(429);
      expect(fresh.json).toMatchObject({ verdict: 'halted', duplicate_skips: 3 });
      expect(fresh.headers['effectgate-operation']).toBeUndefined();
      expect(issuesOf('A brand new effect')).toHaveLength(0);
      // Another run is not halted.
      expect((await createIssue({ title: 'A brand new effect' }, { 'effectgate-run': 'other' })).status).toBe(
        201,
      );
    });

    it('answers pending (409 + Retry-After) while another run holds the reservation past wait', async () => {
      const slow = createIssue({ title: 'slow effect' }, { 'effectgate-run': 'holder' });
      await new Promise((r) => setTimeout(r, 150));
      const contender = await createIssue({ title: 'slow effect' }, { 'effectgate-run': 'contender' });
      expect(contender.status).toBe(409);
      expect(contender.json).toMatchObject({ verdict: 'pending', operation_state: 'open' });
      expect(contender.headers['retry-after']).toBe('1');
      expect((await slow).status).toBe(201);
      expect(issuesOf('slow effect')).toHaveLength(1);
      // Once confirmed, the same proposal is a duplicate.
      expect(
        (await createIssue({ title: 'slow effect' }, { 'effectgate-run': 'contender' })).json['verdict'],
      ).toBe('duplicate');
    });

    it('releases the key after a definite failure: the retry is attempt 2 of the same operation, same Idempotency-Key', async () => {
      const first = await createIssue({ title: 'fail4xx once' });
      expect(first.status).toBe(422);
      expect(first.headers['effectgate-verdict']).toBe('allow');
      failedOnce = first.headers['effectgate-operation'] as string;
      const again = await createIssue({ title: 'fail4xx once' });
      expect(again.headers['effectgate-verdict']).toBe('allow');
      expect(again.headers['effectgate-operation']).toBe(first.headers['effectgate-operation']);
      expect(again.headers['effectgate-attempt']).not.toBe(first.headers['effectgate-attempt']);
      const keys = issuesOf('fail4xx once').map((r) => r.headers['idempotency-key']);
      expect(keys).toEqual([first.headers['effectgate-operation'], first.headers['effectgate-operation']]);
    });

    it('treats a 5xx as unknown, never failed: the next proposal is held for approval, not sent', async () => {
      const first = await createIssue({ title: 'fail5xx maybe done' });
      expect(first.status).toBe(503);
      expect(first.headers['effectgate-verdict']).toBe('allow');
      const next = await createIssue({ title: 'fail5xx maybe done' }, { 'effectgate-run': 'someone-else' });
      expect(next.status).toBe(428);
      expect(next.json).toMatchObject({
        verdict: 'hold',
        operation_state: 'unknown',
        operation_id: first.headers['effectgate-operation'],
        previous_dispatch_state: 'response_received',
        approval_id: expect.any(String),
      });
      expect(issuesOf('fail5xx maybe done')).toHaveLength(1);
    });

    it('answers a lost response with a gate-made 502: sent_no_response, operation unknown, ids in headers', async () => {
      const r = await createIssue({ title: 'reset after commit' });
      expect(r.status).toBe(502);
      expect(r.headers['content-type']).toBe('application/problem+json');
      expect(r.headers['effectgate-verdict']).toBe('allow');
      expect(r.headers['effectgate-operation']).toMatch(/^[0-9a-f-]{36}$/);
      expect(r.headers['effectgate-attempt']).toMatch(/^[0-9a-f-]{36}$/);
      expect(r.json).toMatchObject({
        verdict: 'allow',
        dispatch_state: 'sent_no_response',
        operation_state: 'unknown',
        operation_id: r.headers['effectgate-operation'],
      });
      expect(issuesOf('reset after commit')).toHaveLength(1);
    });

    it('answers an unreachable destination with 502 not_sent: nothing left the gate, the key is free again', async () => {
      const closed = await startUpstream();
      const port = closed.port;
      await closed.close();
      const send = async (): Promise<Sent> => {
        const res = await request(`http://127.0.0.1:${port}/repos/acme/api/issues`, {
          method: 'POST',
          dispatcher: agent,
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ title: 'nobody home' }),
        });
        return {
          status: res.statusCode,
          headers: res.headers,
          json: (await res.body.json()) as Record<string, unknown>,
        };
      };
      const first = await send();
      expect(first.status).toBe(502);
      expect(first.json).toMatchObject({
        verdict: 'allow',
        dispatch_state: 'not_sent',
        operation_state: 'failed',
      });
      // Definitely not done: the next proposal is allowed again, as attempt 2 of the same operation.
      const second = await send();
      expect(second.json).toMatchObject({ verdict: 'allow', dispatch_state: 'not_sent' });
      expect(second.headers['effectgate-operation']).toBe(first.headers['effectgate-operation']);
    });

    it('governs tools without dedupe as a new operation each time', async () => {
      const a = await request(`${upstream.url}/notify`, {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/json' },
        body: '{"to":"ops"}',
      });
      await a.body.text();
      const b = await request(`${upstream.url}/notify`, {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/json' },
        body: '{"to":"ops"}',
      });
      await b.body.text();
      expect(a.headers['effectgate-verdict']).toBe('allow');
      expect(b.headers['effectgate-verdict']).toBe('allow');
      expect(a.headers['effectgate-operation']).not.toBe(b.headers['effectgate-operation']);
    });

    it('streams ungoverned traffic through untouched, with no Effectgate headers', async () => {
      const res = await request(`${upstream.url}/health?x=1`, {
        dispatcher: agent,
        headers: { 'effectgate-run': 'r' },
      });
      expect(res.statusCode).toBe(200);
      expect(res.headers['effectgate-verdict']).toBeUndefined();
      await res.body.text();
      const seen = upstream.requests.at(-1)!;
      expect(seen.url).toBe('/health?x=1');
      expect(seen.headers['effectgate-run']).toBeUndefined();
    });

    it('refuses a governed body over the limit with 413 before sending anything', async () => {
      const before = upstream.requests.length;
      const r = await createIssue({ title: 'huge', pad: 'x'.repeat(1024 * 1024 + 10) });
      expect(r.status).toBe(413);
      expect(upstream.requests.length).toBe(before);
    });

    it('works for curl -x (a real unmodified client)', async () => {
      const args = ['-s', '-i', '-x', proxy.url, '-X', 'POST', '-H', 'content-type: application/json'];
      const url = `${upstream.url}/repos/acme/curl/issues`;
      const one = await execFileP('curl', [...args, '-d', '{"title":"from curl"}', url]);
      const two = await execFileP('curl', [...args, '-d', '{"title":"from curl"}', url]);
      expect(one.stdout).toMatch(/^HTTP\/1\.1 201/);
      expect(one.stdout.toLowerCase()).toContain('effectgate-verdict: allow');
      expect(two.stdout).toMatch(/^HTTP\/1\.1 409/);
      expect(two.stdout).toContain('"verdict":"duplicate"');
      expect(issuesOf('from curl')).toHaveLength(1);
    });

    it('keeps secrets out of every table, records retry lineage, and leaves an intact audit chain', async () => {
      // One more call carrying every kind of credential a client sends, plus a secret in the query.
      const res = await request(`${upstream.url}/repos/acme/api/issues?access_token=qs-secret-789`, {
        method: 'POST',
        dispatcher: agent,
        headers: {
          'content-type': 'application/json',
          cookie: 'session=cookie-secret-456',
          'x-api-key': 'apikey-secret-321',
          authorization: 'token sk-live-123',
        },
        body: JSON.stringify({ title: 'Credentials everywhere', token: 'hunter2' }),
      });
      expect(res.statusCode).toBe(201);
      await res.body.text();
      await proxy.stop();

      const dump = await runCli(['audit', 'verify', '--store', storeUrl, '--json']);
      expect(dump.code, dump.stderr).toBe(0);
      const report = JSON.parse(dump.stdout) as { ok: boolean; checked: number };
      expect(report.ok).toBe(true);
      expect(report.checked).toBeGreaterThan(20);

      const { openKyselyStore } = await import('../../src/store/open-store.js');
      const { sql } = await import('kysely');
      const store = await openKyselyStore({ url: storeUrl, migrate: false });
      try {
        // The operation, attempt and decision rows are made from the events off the hot path:
        // made now, so that the tables searched hold every row.
        for (let round = 0; round < 100; round++) {
          if (!(await store.projectEvents({ wait: true })).more) break;
        }
        let everything = '';
        for (const table of ['events', 'operations', 'attempts', 'decisions', 'dedupe_keys', 'runs']) {
          const rows = await sql.raw(`select * from ${table}`).execute(store.db);
          everything += JSON.stringify(rows.rows);
        }
        for (const secret of [
          'sk-live-123',
          'hunter2',
          'cookie-secret-456',
          'apikey-secret-321',
          'qs-secret-789',
        ]) {
          expect(everything, secret).not.toContain(secret);
        }
        expect(everything).toContain('Credentials everywhere');

        // The retry after a definite failure is attempt 2 of the same operation, with its parent.
        const op = await store.getOperation(failedOnce);
        expect(op?.attempts.map((a) => a.number)).toEqual([1, 2]);
        expect(op?.attempts[1]?.retryOfAttemptId).toBe(op?.attempts[0]?.id);
        expect(op?.attempts[0]).toMatchObject({ dispatchState: 'response_received', status: 422 });
      } finally {
        await store.close();
      }
      proxy = await startProxyProcess(['--policies', POLICIES, '--store', storeUrl]);
    });
  });
}

describe('default: block', () => {
  it('refuses unclassified egress with 403 problem+json and no store, governs classified calls', async () => {
    const upstream = await startUpstream(reply(201, { ok: true }));
    const dir = mkdtempSync(join(tmpdir(), 'effectgate-e2e-'));
    const proxy = await startProxyProcess([
      '--policies',
      BLOCK_POLICIES,
      '--store',
      `pglite:${join(dir, 's')}`,
      '--allow-connect-ports',
      String(upstream.port),
    ]);
    const agent = new ProxyAgent({ uri: proxy.url, proxyTunnel: false });
    try {
      const blocked = await request(`${upstream.url}/anything`, {
        dispatcher: agent,
        headers: { accept: 'application/json' },
      });
      expect(blocked.statusCode).toBe(403);
      expect(blocked.headers['content-type']).toBe('application/json');
      expect(await blocked.body.json()).toMatchObject({ verdict: 'block', reason: 'unclassified' });
      const ok = await request(`${upstream.url}/repos/a/b/issues`, {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/json' },
        body: '{"title":"t"}',
      });
      expect(ok.statusCode).toBe(201);
      await ok.body.text();
      expect(upstream.requests.map((r) => r.url)).toEqual(['/repos/a/b/issues']);

      // undici's default ProxyAgent tunnels http:// through CONNECT: the tunnel to a host a tool
      // names opens, and every request inside it is classified on its own.
      const tunnel = new ProxyAgent({ uri: proxy.url });
      try {
        const dup = await request(`${upstream.url}/repos/a/b/issues`, {
          method: 'POST',
          dispatcher: tunnel,
          headers: { 'content-type': 'application/json' },
          body: '{"title":"t"}',
        });
        expect(dup.statusCode).toBe(409);
        expect(dup.headers['effectgate-verdict']).toBe('duplicate');
        await dup.body.text();
        const other = await request(`${upstream.url}/elsewhere`, { dispatcher: tunnel });
        expect(other.statusCode).toBe(403);
        await other.body.text();
      } finally {
        await tunnel.close();
      }
      expect(upstream.requests).toHaveLength(1);
    } finally {
      await agent.close();
      await proxy.stop();
      await upstream.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
