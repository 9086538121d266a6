/**
 * The admin API over real HTTP on real stores: bearer authentication (constant-time, never echoed),
 * refusals as problem+json, and the operations and approvals an operator investigates and decides.
 */
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AdminServer, createAdminServer } from '../../../src/admin/index.js';
import type { ApprovalRecord, OperationRecord } from '../../../src/store/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, outcome, reserve, scope } from '../store/inputs.js';

const TOKEN = 'eg-admin-3b9c1f0e7d2a4c58a1f6';

interface Reply {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly text: string;
  // biome-ignore lint/suspicious/noExplicitAny: test replies are inspected field by field
  readonly json: any;
}

/** One request with node:http, so raw paths, odd methods and oversized bodies go out as written. */
function call(
  port: number,
  method: string,
  path: string,
  options: { token?: string | null; authorization?: string; body?: string | Buffer } = {},
): Promise<Reply> {
  const headers: Record<string, string> = {};
  const token = options.token === undefined ? TOKEN : options.token;
  if (options.authorization !== undefined) headers['authorization'] = options.authorization;
  else if (token !== null) headers['authorization'] = `Bearer ${token}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown = null;
        try {
          json = text === '' ? null : JSON.parse(text);
        } catch {
          json = null;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
      });
      res.on('error', reject);
    });
    // The server may answer (413) and close before the whole body is written.
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE' && err.code !== 'ECONNRESET') reject(err);
    });
    req.end(options.body);
  });
}

function expectProblem(r: Reply, status: number): void {
  expect(r.status, r.text).toBe(status);
  expect(r.headers['content-type']).toBe('application/problem+json');
  expect(r.headers['cache-control']).toBe('no-store');
  expect(r.json).toMatchObject({ status, type: expect.stringMatching(/^urn:effectgate:problem:/) });
  expect(typeof r.json.title).toBe('string');
  expect(typeof r.json.detail).toBe('string');
}

async function startAdmin(
  store: TestStore,
  token: string | null,
): Promise<{ admin: AdminServer; port: number }> {
  const admin = createAdminServer({ store, token });
  const addr = await admin.listen('127.0.0.1', 0);
  return { admin, port: addr.port };
}

for (const target of storeTargets()) {
  describe(`admin API on ${target.name}`, () => {
    let store: TestStore;
    let admin: AdminServer;
    let port: number;

    beforeAll(async () => {
      store = await openTestStore(target);
      ({ admin, port } = await startAdmin(store, TOKEN));
    });

    afterAll(async () => {
      await admin?.close();
      await store?.close();
    });

    describe('health probes stay open', () => {
      it('GET /healthz and /readyz answer without a token', async () => {
        const health = await call(port, 'GET', '/healthz', { token: null });
        expect(health.status).toBe(200);
        expect(health.json).toEqual({ status: 'ok' });
        expect(health.headers['cache-control']).toBe('no-store');
        const ready = await call(port, 'GET', '/readyz?probe=1', { token: null });
        expect(ready.status).toBe(200);
        expect(ready.json).toEqual({ status: 'ready', store: store.kind });
      });

      it('answers 405 with Allow to another method on a probe', async () => {
        const r = await call(port, 'POST', '/healthz', { token: null, body: '{}' });
        expectProblem(r, 405);
        expect(r.headers['allow']).toBe('GET, HEAD');
      });

      it('answers 404 problem+json to an unknown path', async () => {
        expectProblem(await call(port, 'GET', '/metrics-nope', { token: null }), 404);
        expectProblem(await call(port, 'GET', '/', { token: null }), 404);
      });
    });

    describe('bearer authentication of /api/*', () => {
      it('refuses a request without a token with 401 and WWW-Authenticate: Bearer', async () => {
        const r = await call(port, 'GET', '/api/operations', { token: null });
        expectProblem(r, 401);
        expect(r.headers['www-authenticate']).toMatch(/^Bearer\b/);
      });

      it('refuses a wrong token, a token of another length, and other schemes', async () => {
        for (const authorization of [
          `Bearer ${TOKEN.slice(0, -1)}x`,
          `Bearer ${TOKEN}${TOKEN}`,
          'Bearer ',
          `Basic ${Buffer.from(`admin:${TOKEN}`).toString('base64')}`,
          TOKEN,
        ]) {
          const r = await call(port, 'GET', '/api/approvals', { authorization });
          expectProblem(r, 401);
          expect(r.headers['www-authenticate']).toMatch(/^Bearer\b/);
        }
      });

      it('never echoes the token it got nor the one it holds', async () => {
        const wrong = 'wrong-token-4f1d2c3b-visible';
        const r = await call(port, 'GET', `/api/operations`, { token: wrong });
        expectProblem(r, 401);
        expect(r.headers['www-authenticate']).toContain('invalid_token');
        const everything = r.text + JSON.stringify(r.headers);
        expect(everything).not.toContain(wrong);
        expect(everything).not.toContain(TOKEN);
      });

      it('checks the token before routing: unknown /api paths are 401 without it', async () => {
        expectProblem(await call(port, 'GET', '/api/nope', { token: null }), 401);
        expectProblem(await call(port, 'GET', '/api/nope'), 404);
      });

      it('accepts the scheme in any case', async () => {
        const r = await call(port, 'GET', '/api/nope', { authorization: `bearer ${TOKEN}` });
        expectProblem(r, 404);
      });

      it('without a configured token answers 401 saying how to set one', async () => {
        const off = await startAdmin(store, null);
        try {
          const r = await call(off.port, 'GET', '/api/operations');
          expectProblem(r, 401);
          expect(r.json.detail).toContain('EFFECTGATE_ADMIN_TOKEN');
          expect(r.json.detail).toContain('--admin-token-file');
          expect(r.text).not.toContain(TOKEN);
          expect((await call(off.port, 'GET', '/healthz', { token: null })).status).toBe(200);
        } finally {
          await off.admin.close();
        }
      });
    });

    describe('refusals of bad requests (problem+json, never a crash)', () => {
      it('405 with Allow for a wrong method on a known route', async () => {
        const del = await call(port, 'DELETE', '/api/operations');
        expectProblem(del, 405);
        expect(del.headers['allow']).toBe('GET, HEAD');
        const get = await call(port, 'GET', '/api/approvals/some-id/approve');
        expectProblem(get, 405);
        expect(get.headers['allow']).toBe('POST');
        const post = await call(port, 'POST', '/api/operations/x', { body: '{}' });
        expectProblem(post, 405);
      });

      it('404 for unknown routes and actions', async () => {
        for (const path of [
          '/api',
          '/api/',
          '/api/operations/',
          '/api/operations/a/b',
          '/api/approvals/x/frobnicate',
        ]) {
          const post = path.includes('frobnicate');
          const r = await call(port, post ? 'POST' : 'GET', path, post ? { body: '{}' } : {});
          expect(r.status, `${path}: ${r.text}`).toBe(404);
          expectProblem(r, 404);
        }
      });

      it('400 for bad operation filters, naming what is allowed', async () => {
        const cases: [string, RegExp][] = [
          ['state=bogus', /open, succeeded, failed, unknown, cancelled, duplicate_effect_confirmed/],
          ['limit=0', /1 to 1000/],
          ['limit=1001', /1 to 1000/],
          ['limit=ten', /1 to 1000/],
          ['limit=-5', /1 to 1000/],
          ['since=yesterday', /duration|ISO 8601/],
          ['since=2025-13-45', /duration|ISO 8601/],
          ['color=red', /Unknown query parameter/],
          ['state=unknown&state=open', /more than once/],
          ['tool=%00', /control/],
        ];
        for (const [query, detail] of cases) {
          const r = await call(port, 'GET', `/api/operations?${query}`);
          expectProblem(r, 400);
          expect(r.json.detail, query).toMatch(detail);
        }
        expectProblem(await call(port, 'GET', '/api/approvals?state=pending'), 400);
        expectProblem(await call(port, 'GET', '/api/approvals?limit=0'), 400);
      });

      it('400 for an id with malformed percent-encoding or control characters', async () => {
        for (const path of [
          '/api/operations/%E0%A4%A',
          '/api/operations/%',
          '/api/operations/%00',
          '/api/runs/a%0Ab',
          '/api/approvals/%ZZ',
        ]) {
          const r = await call(port, 'GET', path);
          expectProblem(r, 400);
        }
        expectProblem(await call(port, 'POST', '/api/approvals/%E0%A4%A/approve', { body: '{}' }), 400);
      });

      it('400 for a request target that is not a path', async () => {
        const r = await call(port, 'GET', 'http://127.0.0.1/api/operations');
        expectProblem(r, 400);
      });

      it('413 for a decision body over 64 KiB, and the server goes on', async () => {
        const body = JSON.stringify({ by: 'alice', reason: 'x'.repeat(70 * 1024) });
        const r = await call(port, 'POST', '/api/approvals/some-id/approve', { body });
        expectProblem(r, 413);
        expect((await call(port, 'GET', '/healthz')).status).toBe(200);
      });

      it('413 for a chunked body that grows past 64 KiB without a content-length', async () => {
        const status = await new Promise<number>((resolve, reject) => {
          const req = httpRequest(
            {
              host: '127.0.0.1',
              port,
              method: 'POST',
              path: '/api/approvals/some-id/deny',
              headers: { authorization: `Bearer ${TOKEN}`, 'transfer-encoding': 'chunked' },
              agent: false,
            },
            (res) => {
              res.resume();
              resolve(res.statusCode ?? 0);
            },
          );
          req.on('error', (err: NodeJS.ErrnoException) => {
            if (err.code !== 'EPIPE' && err.code !== 'ECONNRESET') reject(err);
          });
          const piece = Buffer.alloc(16 * 1024, 0x20);
          for (let i = 0; i < 6; i++) req.write(piece);
          req.end();
        });
        expect(status).toBe(413);
        expect((await call(port, 'GET', '/healthz')).status).toBe(200);
      });

      it('400 for a body that is not a JSON object, or a decision without by/reason', async () => {
        const bodies: [string, string, RegExp][] = [
          ['approve', '', /JSON object/],
          ['approve', 'not json', /JSON object/],
          ['approve', '[1,2]', /JSON object/],
          ['approve', 'null', /JSON object/],
          ['approve', '"text"', /JSON object/],
          ['approve', '{"reason":"checked"}', /by/],
          ['approve', '{"by":"alice"}', /reason/],
          ['approve', '{"by":"   ","reason":"checked"}', /by/],
          ['approve', `{"by":"${'a'.repeat(201)}","reason":"checked"}`, /200/],
          ['approve', `{"by":"alice","reason":"${'r'.repeat(2001)}"}`, /2000/],
          ['approve', '{"by":"al\\u001bice","reason":"checked"}', /control/],
          ['approve', '{"by":42,"reason":"checked"}', /by/],
          ['approve', '{"by":"alice","reason":"checked","ttl":"soon"}', /duration/],
          ['approve', '{"by":"alice","reason":"checked","ttl":"0s"}', /longer than 0/],
          ['approve', '{"by":"alice","reason":"checked","ttl":3600}', /duration/],
          ['deny', '{"by":"alice","reason":"checked","ttl":"1h"}', /only to approve/],
          ['revoke', '{"by":"alice","reason":"checked","note":"x"}', /Unknown member "note"/],
        ];
        for (const [action, body, detail] of bodies) {
          const r = await call(port, 'POST', `/api/approvals/some-id/${action}`, { body });
          expectProblem(r, 400);
          expect(r.json.detail, body.slice(0, 80)).toMatch(detail);
        }
      });

      it('answers every refusal with no-store and no stack trace', async () => {
        const r = await call(port, 'POST', '/api/approvals/x/deny', { body: '{' });
        expectProblem(r, 400);
        expect(r.text).not.toMatch(/at .*\.(ts|js):\d+/);
      });
    });

    describe('a store that cannot answer', () => {
      it('503 problem+json with EG_ERR_STORE_UNAVAILABLE, and /readyz 503', async () => {
        const broken = await openTestStore(target);
        const down = await startAdmin(broken, TOKEN);
        try {
          await broken.close();
          const r = await call(down.port, 'GET', '/api/operations/0190a000-0000-7000-8000-000000000000');
          expectProblem(r, 503);
          expect(r.json.code).toBe('EG_ERR_STORE_UNAVAILABLE');
          const ready = await call(down.port, 'GET', '/readyz', { token: null });
          expect(ready.status).toBe(503);
        } finally {
          await down.admin.close();
        }
      });
    });

    // Needs the store's operations/approvals API (migration 0002): listOperations(filter),
    // countOperations, listObservations, listApprovals, getApproval, decideApproval.
    describe('operations, runs and approvals', () => {
      const runA = newRun();
      const runB = newRun();
      let unknownOp: string;
      let succeededOp: string;
      let otherToolOp: string;
      let otherTenantOp: string;
      let approvalId: string;

      /** A fresh operation whose outcome is unknown, then a proposal the store holds: its approval id. */
      async function heldApproval(): Promise<{ operationId: string; approvalId: string }> {
        const key = newKey();
        const first = await store.decide(reserve(newRun(), key, { unknownRule: 'hold' }));
        expectVerdict(first, 'allow');
        await store.recordOutcome(outcome(first, key, 'unknown'));
        const held = await store.decide(reserve(newRun(), key, { unknownRule: 'hold' }));
        expectVerdict(held, 'hold');
        return { operationId: first.operationId, approvalId: held.approvalId };
      }

      function post(id: string, action: string, body: unknown): Promise<Reply> {
        return call(port, 'POST', `/api/approvals/${encodeURIComponent(id)}/${action}`, {
          body: JSON.stringify(body),
        });
      }

      beforeAll(async () => {
        // A dedicated store: counts must be exact.
        await admin.close();
        await store.close();
        store = await openTestStore(target);
        ({ admin, port } = await startAdmin(store, TOKEN));

        const keyU = newKey();
        const a1 = await store.decide(reserve(runA, keyU, { unknownRule: 'hold' }));
        expectVerdict(a1, 'allow');
        await store.recordOutcome(outcome(a1, keyU, 'unknown'));
        unknownOp = a1.operationId;
        const hold = await store.decide(reserve(runB, keyU, { unknownRule: 'hold' }));
        expectVerdict(hold, 'hold');
        approvalId = hold.approvalId;

        const keyS = newKey();
        const a2 = await store.decide(reserve(runA, keyS));
        expectVerdict(a2, 'allow');
        await store.recordOutcome(outcome(a2, keyS, 'succeeded'));
        succeededOp = a2.operationId;

        const keyT = newKey();
        const a3 = await store.decide(reserve(runB, keyT, { toolId: 'slack.post_message' }));
        expectVerdict(a3, 'allow');
        await store.recordOutcome(outcome(a3, keyT, 'failed'));
        otherToolOp = a3.operationId;

        const a4 = await store.decide(reserve(runB, null, { scope: { ...scope, tenant: 'globex' } }));
        expectVerdict(a4, 'allow');
        await store.recordOutcome(outcome(a4, null, 'succeeded'));
        otherTenantOp = a4.operationId;
      });

      const ids = (ops: OperationRecord[]): string[] => ops.map((o) => o.id).sort();

      it('GET /api/operations lists them with counts for every state', async () => {
        const r = await call(port, 'GET', '/api/operations');
        expect(r.status, r.text).toBe(200);
        expect(r.headers['content-type']).toBe('application/json');
        expect(r.headers['cache-control']).toBe('no-store');
        expect(ids(r.json.operations)).toEqual([unknownOp, succeededOp, otherToolOp, otherTenantOp].sort());
        expect(r.json.counts).toEqual({
          open: 0,
          accepted: 0,
          succeeded: 2,
          failed: 1,
          unknown: 1,
          cancelled: 0,
          duplicate_effect_confirmed: 0,
        });
      });

      it('?state=unknown lists exactly the unknown operations; counts still cover every state', async () => {
        const r = await call(port, 'GET', '/api/operations?state=unknown');
        expect(r.status, r.text).toBe(200);
        expect(ids(r.json.operations)).toEqual([unknownOp]);
        expect(r.json.operations[0]).toMatchObject({
          state: 'unknown',
          toolId: 'github.create_issue',
          scope,
        });
        expect(r.json.counts).toMatchObject({ unknown: 1, succeeded: 2, failed: 1 });
      });

      it('filters by tool, tenant, since and limit', async () => {
        const tool = await call(port, 'GET', '/api/operations?tool=slack.post_message');
        expect(ids(tool.json.operations)).toEqual([otherToolOp]);
        expect(tool.json.counts).toMatchObject({ failed: 1, succeeded: 0, unknown: 0 });

        const tenant = await call(port, 'GET', '/api/operations?tenant=globex');
        expect(ids(tenant.json.operations)).toEqual([otherTenantOp]);

        const past = await call(port, 'GET', '/api/operations?since=2000-01-01');
        expect(past.json.operations).toHaveLength(4);
        const recent = await call(port, 'GET', '/api/operations?since=1h');
        expect(recent.json.operations).toHaveLength(4);
        const future = await call(port, 'GET', '/api/operations?since=2999-01-01T00:00:00Z');
        expect(future.status).toBe(200);
        expect(future.json.operations).toEqual([]);
        expect(future.json.counts.succeeded).toBe(0);

        const one = await call(port, 'GET', '/api/operations?limit=1');
        expect(one.json.operations).toHaveLength(1);
        expect(one.json.counts.succeeded).toBe(2);
      });

      it('GET /api/operations/:id shows the operation, its decisions, observations and approvals', async () => {
        const r = await call(port, 'GET', `/api/operations/${unknownOp}`);
        expect(r.status, r.text).toBe(200);
        expect(r.json.operation).toMatchObject({ id: unknownOp, state: 'unknown' });
        expect(r.json.operation.attempts).toHaveLength(1);
        expect(r.json.operation.attempts[0]).toMatchObject({ dispatchState: 'sent_no_response' });
        expect(r.json.decisions.map((d: { verdict: string }) => d.verdict).sort()).toEqual(['allow', 'hold']);
        expect(r.json.observations).toEqual([]);
        expect(r.json.approvals.map((a: ApprovalRecord) => a.id)).toEqual([approvalId]);
      });

      it('GET /api/operations/:id of an unknown id is 404 EG_ERR_NOT_FOUND', async () => {
        const r = await call(port, 'GET', '/api/operations/no-such-operation');
        expectProblem(r, 404);
        expect(r.json.code).toBe('EG_ERR_NOT_FOUND');
      });

      it('GET /api/runs/:id lists the run decisions; an unknown run is 404', async () => {
        const r = await call(port, 'GET', `/api/runs/${encodeURIComponent(runA)}`);
        expect(r.status, r.text).toBe(200);
        expect(r.json.run_id).toBe(runA);
        expect(r.json.decisions).toHaveLength(2);
        expect(r.json.decisions.every((d: { runId: string }) => d.runId === runA)).toBe(true);
        const none = await call(port, 'GET', '/api/runs/run-that-never-was');
        expectProblem(none, 404);
        expect(none.json.code).toBe('EG_ERR_NOT_FOUND');
      });

      it('GET /api/approvals?state=requested shows the card: intent, previous dispatch, planned recovery', async () => {
        const r = await call(port, 'GET', '/api/approvals?state=requested');
        expect(r.status, r.text).toBe(200);
        const card = (r.json.approvals as ApprovalRecord[]).find((a) => a.id === approvalId);
        expect(card).toMatchObject({
          operationId: unknownOp,
          state: 'requested',
          previousDispatchState: 'sent_no_response',
          intent: { toolId: 'github.create_issue', method: 'POST', host: 'api.github.com', scope },
          decidedBy: null,
        });
        expect(card!.plannedRecovery.length).toBeGreaterThan(0);
        const approved = await call(port, 'GET', '/api/approvals?state=approved');
        expect(approved.json.approvals).toEqual([]);
      });

      it('GET /api/approvals/:id returns the record; an unknown id is 404', async () => {
        const r = await call(port, 'GET', `/api/approvals/${approvalId}`);
        expect(r.status, r.text).toBe(200);
        expect(r.json).toMatchObject({ id: approvalId, state: 'requested' });
        const none = await call(port, 'GET', '/api/approvals/no-such-approval');
        expectProblem(none, 404);
        expect(none.json.code).toBe('EG_ERR_NOT_FOUND');
      });

      it('approve (ttl defaults to 1h), then approve again is 409, then revoke', async () => {
        const before = Date.now();
        const r = await post(approvalId, 'approve', {
          by: 'alice@example.com',
          reason: 'checked: no issue was created',
        });
        expect(r.status, r.text).toBe(200);
        expect(r.json).toMatchObject({
          id: approvalId,
          state: 'approved',
          decidedBy: 'alice@example.com',
          reason: 'checked: no issue was created',
        });
        const expires = Date.parse(r.json.expiresAt);
        expect(expires).toBeGreaterThanOrEqual(before + 3_600_000 - 60_000);
        expect(expires).toBeLessThanOrEqual(Date.now() + 3_600_000 + 60_000);

        const again = await post(approvalId, 'approve', { by: 'bob', reason: 'twice' });
        expectProblem(again, 409);
        expect(again.json.code).toBe('EG_ERR_APPROVAL_STATE');

        const revoked = await post(approvalId, 'revoke', { by: 'carol', reason: 'changed our mind' });
        expect(revoked.status, revoked.text).toBe(200);
        expect(revoked.json).toMatchObject({ id: approvalId, state: 'revoked', revokedBy: 'carol' });
        expect(revoked.json.revokedAt).not.toBeNull();
      });

      it('approve with ttl 2h or permanent', async () => {
        const two = await heldApproval();
        const r = await post(two.approvalId, 'approve', { by: 'alice', reason: 'ok', ttl: '2h' });
        expect(r.status, r.text).toBe(200);
        expect(Date.parse(r.json.expiresAt) - Date.now()).toBeGreaterThan(2 * 3_600_000 - 120_000);

        const forever = await heldApproval();
        const p = await post(forever.approvalId, 'approve', { by: 'alice', reason: 'ok', ttl: 'permanent' });
        expect(p.status, p.text).toBe(200);
        expect(p.json).toMatchObject({ state: 'approved', expiresAt: null });
      });

      it('deny, then approving the denied one is 409 and revoking it is 409', async () => {
        const held = await heldApproval();
        const r = await post(held.approvalId, 'deny', { by: 'dave', reason: 'the issue exists already' });
        expect(r.status, r.text).toBe(200);
        expect(r.json).toMatchObject({ state: 'denied', decidedBy: 'dave', expiresAt: null });
        const approve = await post(held.approvalId, 'approve', { by: 'erin', reason: 'retry' });
        expectProblem(approve, 409);
        const revoke = await post(held.approvalId, 'revoke', { by: 'erin', reason: 'retry' });
        expectProblem(revoke, 409);
        expect(revoke.json.code).toBe('EG_ERR_APPROVAL_STATE');
      });

      it('deciding an unknown approval is 404 EG_ERR_NOT_FOUND', async () => {
        const r = await post('no-such-approval', 'approve', { by: 'alice', reason: 'ok' });
        expectProblem(r, 404);
        expect(r.json.code).toBe('EG_ERR_NOT_FOUND');
      });
    });
  });
}
