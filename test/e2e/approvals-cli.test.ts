/**
 * `effectgate operations`, `approvals` and `recover` as users run them (the built bin), on a real
 * embedded store prepared through the store API.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApprovalRecord, OperationRecord, Store } from '../../src/store/index.js';
import { openKyselyStore } from '../../src/store/open-store.js';
import { runCli } from '../helpers/proxy-process.js';
import { expectVerdict, newKey, newRun, outcome, reserve } from '../integration/store/inputs.js';

const dir = mkdtempSync(join(tmpdir(), 'effectgate-approvals-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Every command names a store, so none of them ever touches ./.effectgate of the repository. */
const scratch = `pglite:${join(dir, 'scratch')}`;

async function withStore<T>(url: string, fn: (store: Store) => Promise<T>): Promise<T> {
  const store = await openKyselyStore({ url });
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

/** An operation whose outcome is unknown, then a proposal held for approval: the approval id. */
async function heldApproval(store: Store): Promise<{ operationId: string; approvalId: string }> {
  const key = newKey();
  const first = await store.decide(reserve(newRun(), key, { unknownRule: 'hold' }));
  expectVerdict(first, 'allow');
  await store.recordOutcome(outcome(first, key, 'unknown'));
  const held = await store.decide(reserve(newRun(), key, { unknownRule: 'hold' }));
  expectVerdict(held, 'hold');
  return { operationId: first.operationId, approvalId: held.approvalId };
}

describe('argument validation (before any store is opened)', () => {
  it('lists the new commands in the usage', async () => {
    const r = await runCli(['--help']);
    expect(r.code).toBe(0);
    for (const command of ['operations', 'approvals list', 'approvals approve|deny|revoke', 'recover']) {
      expect(r.stdout).toContain(command);
    }
  });

  it.each([
    [['approve', 'some-id', '--reason', 'checked'], '--by WHO'],
    [['approve', 'some-id', '--by', 'alice'], '--reason TEXT'],
    [['deny', 'some-id'], '--by WHO, --reason TEXT'],
    [['revoke', '--by', 'alice', '--reason', 'x'], '<id>'],
  ])('approvals %j without %s exits 2 saying what is missing', async (args, missing) => {
    const r = await runCli(['approvals', ...args, '--store', scratch]);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain(`needs ${missing}`);
    expect(r.stderr).toContain('usage: effectgate approvals');
  });

  it('approvals with an unknown subcommand, two ids, or --ttl on deny exits 2', async () => {
    expect((await runCli(['approvals', 'frobnicate', '--store', scratch])).code).toBe(2);
    expect((await runCli(['approvals', '--store', scratch])).code).toBe(2);
    const two = await runCli([
      'approvals',
      'deny',
      'a',
      'b',
      '--by',
      'x',
      '--reason',
      'y',
      '--store',
      scratch,
    ]);
    expect(two.code).toBe(2);
    const ttl = await runCli([
      'approvals',
      'deny',
      'a',
      '--by',
      'x',
      '--reason',
      'y',
      '--ttl',
      '1h',
      '--store',
      scratch,
    ]);
    expect(ttl.code).toBe(2);
    expect(ttl.stderr).toContain('--ttl');
  });

  it.each([
    [['approvals', 'approve', 'a', '--by', 'alice', '--reason', 'ok', '--ttl', 'soon'], '--ttl'],
    [['approvals', 'approve', 'a', '--by', 'alice', '--reason', 'ok', '--ttl', '0s'], '--ttl'],
    [['approvals', 'deny', 'a', '--by', '', '--reason', 'ok'], '--by'],
    [['approvals', 'deny', 'a', '--by', 'x'.repeat(201), '--reason', 'ok'], '--by'],
    [['approvals', 'list', '--state', 'pending'], '--state'],
    [['approvals', 'list', '--limit', '0'], '--limit'],
    [['operations', '--state', 'bogus'], '--state must be one of open, succeeded, failed, unknown'],
    [['operations', '--limit', '1001'], '--limit must be an integer from 1 to 1000'],
    [['operations', '--since', 'last week'], '--since'],
    [['recover', '--stale-after', 'soon'], '--stale-after'],
    [['recover', '--stale-after', 'permanent'], '--stale-after'],
  ])('%j exits 1 with EG_ERR_CONFIG_INVALID naming %s', async (args, text) => {
    const r = await runCli([...args, '--store', scratch]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain('EG_ERR_CONFIG_INVALID');
    expect(r.stderr).toContain(text);
  });

  it('operations and recover take no positional arguments', async () => {
    expect((await runCli(['operations', 'unknown', '--store', scratch])).code).toBe(2);
    expect((await runCli(['recover', 'now', '--store', scratch])).code).toBe(2);
  });

  it('recover refuses an invalid policy folder with exit 1', async () => {
    const r = await runCli([
      'recover',
      '--policies',
      'test/fixtures/policies/duplicate-id',
      '--store',
      scratch,
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('EG_ERR_POLICY_INVALID');
  });
});

// Needs the store's operations/approvals API (migration 0002).
describe('effectgate operations', { timeout: 60_000 }, () => {
  const store = `pglite:${join(dir, 'operations')}`;
  let unknownOp: string;
  let succeededOp: string;

  beforeAll(async () => {
    await withStore(store, async (s) => {
      ({ operationId: unknownOp } = await heldApproval(s));
      const key = newKey({ values: ['acme', 'app', `a long title ${'x'.repeat(200)}`] });
      const a = await s.decide(reserve(newRun(), key));
      expectVerdict(a, 'allow');
      await s.recordOutcome(outcome(a, key, 'succeeded'));
      succeededOp = a.operationId;
    });
  });

  it('prints counts per state, then each operation, within 100 columns', async () => {
    const r = await runCli(['operations', '--store', store]);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(
      /open 0 +succeeded 1 +failed 0 +unknown 1 +cancelled 0 +duplicate_effect_confirmed 0/,
    );
    expect(r.stdout).toContain(unknownOp);
    expect(r.stdout).toContain(succeededOp);
    expect(r.stdout).toContain('github.create_issue');
    expect(r.stdout).toContain('acme/support/triage-bot');
    expect(r.stdout).toContain('1 attempt');
    expect(r.stdout).toMatch(/created \d{4}-\d{2}-\d{2}T/);
    expect(r.stdout).toContain('…');
    for (const line of lines) expect(line.length, line).toBeLessThanOrEqual(100);
  });

  it('--state unknown lists exactly the unknown operations', async () => {
    const r = await runCli(['operations', '--state', 'unknown', '--store', store]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(unknownOp);
    expect(r.stdout).not.toContain(succeededOp);
  });

  it('--json prints { counts, operations }', async () => {
    const r = await runCli(['operations', '--state', 'unknown', '--json', '--store', store]);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { counts: Record<string, number>; operations: OperationRecord[] };
    expect(out.operations.map((o) => o.id)).toEqual([unknownOp]);
    expect(out.counts).toEqual({
      open: 0,
      accepted: 0,
      succeeded: 1,
      failed: 0,
      unknown: 1,
      cancelled: 0,
      duplicate_effect_confirmed: 0,
    });
  });

  it('filters by tool and tenant', async () => {
    const none = await runCli(['operations', '--tool', 'slack.post', '--json', '--store', store]);
    expect(JSON.parse(none.stdout).operations).toEqual([]);
    const tenant = await runCli([
      'operations',
      '--tenant',
      'acme',
      '--since',
      '1h',
      '--json',
      '--store',
      store,
    ]);
    expect(JSON.parse(tenant.stdout).operations).toHaveLength(2);
  });

  it('filters by since and limit', async () => {
    const future = await runCli(['operations', '--since', '2999-01-01', '--store', store]);
    expect(future.code).toBe(0);
    expect(future.stdout).toContain('no operation(s) match');
    const one = await runCli(['operations', '--limit', '1', '--store', store]);
    expect(one.stdout).toContain('1 of 2 operation(s) (--limit 1)');
  });
});

// Needs the store's operations/approvals API (migration 0002).
describe('effectgate approvals', { timeout: 60_000 }, () => {
  const store = `pglite:${join(dir, 'approvals')}`;
  let first: { operationId: string; approvalId: string };
  let second: { operationId: string; approvalId: string };

  beforeAll(async () => {
    await withStore(store, async (s) => {
      first = await heldApproval(s);
      second = await heldApproval(s);
    });
  });

  it('list shows each card: intent, previous dispatch state, planned recovery, requested at', async () => {
    const r = await runCli(['approvals', 'list', '--state', 'requested', '--store', store]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('2 requested approval(s)');
    expect(r.stdout).toContain(`approval ${first.approvalId}  requested`);
    expect(r.stdout).toContain(first.operationId);
    expect(r.stdout).toContain('POST api.github.com /repos/acme/app/issues');
    expect(r.stdout).toContain('["acme","app","title"]');
    expect(r.stdout).toMatch(/previous +sent_no_response/);
    expect(r.stdout).toMatch(/recovery +\S/);
    expect(r.stdout).toMatch(/requested +\d{4}-\d{2}-\d{2}T/);
    expect(r.stdout).toMatch(/decided +not yet/);
  });

  it('approve records who and why, expires in 1h by default; approving again exits 1', async () => {
    const r = await runCli([
      'approvals',
      'approve',
      first.approvalId,
      '--by',
      'alice@example.com',
      '--reason',
      'checked: no issue was created',
      '--store',
      store,
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`approved ${first.approvalId}`);
    expect(r.stdout).toMatch(/decided +alice@example\.com at \d{4}-.*: checked: no issue was created/);
    const expires = /expires +(\S+)/.exec(r.stdout)?.[1];
    expect(Math.abs(Date.parse(expires!) - (Date.now() + 3_600_000))).toBeLessThan(120_000);

    const again = await runCli([
      'approvals',
      'approve',
      first.approvalId,
      '--by',
      'bob',
      '--reason',
      'x',
      '--store',
      store,
    ]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('EG_ERR_APPROVAL_STATE');
  });

  it('revoke an approved one, --json prints the record', async () => {
    const r = await runCli([
      'approvals',
      'revoke',
      first.approvalId,
      '--by',
      'carol',
      '--reason',
      'changed our mind',
      '--json',
      '--store',
      store,
    ]);
    expect(r.code, r.stderr).toBe(0);
    const record = JSON.parse(r.stdout) as ApprovalRecord;
    expect(record).toMatchObject({ id: first.approvalId, state: 'revoked', revokedBy: 'carol' });
  });

  it('deny with --json; list --state denied shows it', async () => {
    const r = await runCli([
      'approvals',
      'deny',
      second.approvalId,
      '--by',
      'dave',
      '--reason',
      'the issue exists already',
      '--json',
      '--store',
      store,
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ id: second.approvalId, state: 'denied', decidedBy: 'dave' });
    const list = await runCli(['approvals', 'list', '--state', 'denied', '--json', '--store', store]);
    const out = JSON.parse(list.stdout) as { approvals: ApprovalRecord[] };
    expect(out.approvals.map((a) => a.id)).toEqual([second.approvalId]);
  });

  it('an unknown approval id exits 1 with EG_ERR_NOT_FOUND', async () => {
    const r = await runCli([
      'approvals',
      'deny',
      'no-such-approval',
      '--by',
      'x',
      '--reason',
      'y',
      '--store',
      store,
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('EG_ERR_NOT_FOUND');
  });
});

// Needs the store's recover (migration 0002).
describe('effectgate recover', { timeout: 60_000 }, () => {
  const store = `pglite:${join(dir, 'recover')}`;
  let reconcileOp: string;
  let holdOp: string;

  beforeAll(async () => {
    // Two attempts persisted without an outcome, as a gate that died mid-dispatch leaves them:
    // github.create_issue has a reconcile lookup in policies/, mcp.create_ticket has neither
    // honored idempotency nor a lookup (its unknown rule is hold).
    await withStore(store, async (s) => {
      const a = await s.decide(
        reserve(newRun(), newKey(), { unknownRule: 'reconcile', gateInstance: 'dead-gate' }),
      );
      expectVerdict(a, 'allow');
      reconcileOp = a.operationId;
      const b = await s.decide(
        reserve(newRun(), newKey(), {
          toolId: 'mcp.create_ticket',
          unknownRule: 'hold',
          gateInstance: 'dead-gate',
        }),
      );
      expectVerdict(b, 'allow');
      holdOp = b.operationId;
    });
  });

  it('marks them unknown and prints the planned recovery of each, then a summary', async () => {
    const r = await runCli(['recover', '--policies', 'policies', '--store', store]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(reconcileOp);
    expect(r.stdout).toContain(holdOp);
    expect(r.stdout).toContain(
      "looked up at the destination on the next proposal (with that proposal's credentials; the gate stores none)",
    );
    expect(r.stdout).toMatch(/approval \S+ requested/);
    expect(r.stdout).toContain('2 attempt(s) recovered');

    const ops = await runCli(['operations', '--state', 'unknown', '--json', '--store', store]);
    const unknown = (JSON.parse(ops.stdout) as { operations: OperationRecord[] }).operations.map((o) => o.id);
    expect(unknown.sort()).toEqual([reconcileOp, holdOp].sort());

    const approvals = await runCli(['approvals', 'list', '--json', '--store', store]);
    const cards = (JSON.parse(approvals.stdout) as { approvals: ApprovalRecord[] }).approvals;
    expect(cards.map((c) => c.operationId)).toEqual([holdOp]);
  });

  it('a second run finds nothing; --json prints { recovered, count }', async () => {
    const r = await runCli(['recover', '--json', '--store', store]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ recovered: [], count: 0 });
    const text = await runCli(['recover', '--store', store]);
    expect(text.stdout).toContain('nothing to recover');
  });
});
