/**
 * In-process operability: an agent with the gate in process (`createGate` on the
 * embedded store it opens, `gateInterceptor` on undici) locks that store to its process; the gate
 * serves the same store socket the proxy serves, so the built CLI's `operations`, `approvals` and
 * `trail` work beside it, and an operator approves a held retry while the agent runs.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, type Dispatcher, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../src/engine/index.js';
import { STORE_SOCKET } from '../../src/store/index.js';
import { gateInterceptor } from '../../src/undici/index.js';
import { type IssueTracker, startIssueTracker } from '../helpers/issue-tracker.js';
import { runCli } from '../helpers/proxy-process.js';

const POLICIES = new URL('../fixtures/e2e-policies/', import.meta.url).pathname;
const COLLECTION = '/repos/acme/inproc/issues';

describe('operating an in-process gate on its embedded store', () => {
  let dir: string;
  let storeUrl: string;
  let tracker: IssueTracker;
  let gate: Gate;
  let agent: Agent;
  let dispatcher: Dispatcher;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'effectgate-inproc-'));
    storeUrl = `pglite:${join(dir, 'store')}`;
    tracker = await startIssueTracker();
    gate = await createGate({
      policies: POLICIES,
      store: storeUrl,
      scope: { tenant: 'acme', area: 'support', agent: 'in-process' },
      resolveGovernedHosts: 'off',
    });
    agent = new Agent();
    dispatcher = agent.compose(gateInterceptor(gate, { run: 'inproc-run' }));
  }, 60_000);

  afterAll(async () => {
    await agent?.close();
    await gate?.close();
    await tracker?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const create = async (): Promise<{ status: number; json: Record<string, unknown> }> => {
    const res = await request(`${tracker.url}${COLLECTION}`, {
      method: 'POST',
      dispatcher,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ title: 'Disk full on db-1' }),
    });
    return { status: res.statusCode, json: (await res.body.json()) as Record<string, unknown> };
  };

  it('serves the store socket while it runs; operations, approvals and trail work through it', async () => {
    expect(existsSync(join(dir, 'store', STORE_SOCKET))).toBe(true);
    // The tracker creates the issue and cuts the connection: the outcome is unknown.
    tracker.plan(COLLECTION, 'commit-then-destroy');
    expect((await create()).status).toBe(502);
    const held = await create();
    expect(held.status).toBe(428);
    const operationId = String(held.json['operation_id']);
    const approvalId = String(held.json['approval_id']);

    const ops = await runCli(['operations', '--state', 'unknown', '--json', '--store', storeUrl]);
    expect(ops.code, ops.stderr).toBe(0);
    expect((JSON.parse(ops.stdout) as { operations: { id: string }[] }).operations.map((o) => o.id)).toEqual([
      operationId,
    ]);
    const list = await runCli(['approvals', 'list', '--state', 'requested', '--json', '--store', storeUrl]);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toContain(approvalId);

    const approved = await runCli([
      'approvals',
      'approve',
      approvalId,
      '--by',
      'oncall@acme',
      '--reason',
      'checked the tracker: not created twice if it replays the key',
      '--store',
      storeUrl,
    ]);
    expect(approved.code, approved.stderr).toBe(0);
    // The approved retry goes out with the same Idempotency-Key; the tracker replays nothing here
    // (it does not honor keys), so this is the second POST and the operation succeeds.
    const retried = await create();
    expect(retried.status).toBe(201);
    const trail = await runCli(['trail', operationId, '--store', storeUrl]);
    expect(trail.code, trail.stderr).toBe(0);
    expect(trail.stdout).toContain('approved by oncall@acme');
    expect(tracker.posts(COLLECTION).map((p) => p.headers['idempotency-key'])).toEqual([
      operationId,
      operationId,
    ]);
  }, 60_000);

  it('closes the socket with the gate, and the store opens directly afterwards', async () => {
    await gate.close();
    expect(existsSync(join(dir, 'store', STORE_SOCKET))).toBe(false);
    const verify = await runCli(['audit', 'verify', '--store', storeUrl]);
    expect(verify.code, verify.stdout + verify.stderr).toBe(0);
  }, 60_000);
});
