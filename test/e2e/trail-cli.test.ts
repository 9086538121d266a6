/**
 * `effectgate trail` through the built CLI, on an embedded store written by the real store code: an
 * operation with an unknown first attempt, a negative reconciliation, an approved retry the
 * destination replayed, and a later duplicate reads correctly as text and as JSON.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type ReconciliationInput } from '../../src/store/index.js';
import { runCli } from '../helpers/proxy-process.js';
import { type Allow, expectVerdict, newKey, outcome, reserve } from '../integration/store/inputs.js';

const dir = mkdtempSync(join(tmpdir(), 'effectgate-trail-cli-'));
const url = `pglite:${join(dir, 'store')}`;
let first: Allow;
let retry: Allow;

describe('effectgate trail (built CLI)', () => {
  beforeAll(async () => {
    const store = await openStore({ url });
    try {
      const key = newKey();
      const a = await store.decide(reserve('run-owner', key, { step: 'open-ticket' }));
      expectVerdict(a, 'allow');
      first = a;
      await store.recordOutcome(outcome(a, key, 'unknown'));
      const look = await store.decide(reserve('run-retry', key, { unknownRule: 'reconcile' }));
      expectVerdict(look, 'reconcile');
      const none: ReconciliationInput = {
        operationId: a.operationId,
        attemptId: a.attemptId,
        endpoint: 'GET https://api.github.com/repos/acme/app/issues?state=all',
        queryFingerprint: 'sha256:abc',
        result: 'none',
        matches: 0,
        remoteRefs: [],
        status: 200,
        error: null,
        durationMs: 3,
        startedAt: new Date().toISOString(),
      };
      const held = await store.decide(
        reserve('run-retry', key, { unknownRule: 'reconcile', reconciliation: none }),
      );
      expectVerdict(held, 'hold');
      await store.decideApproval({
        approvalId: held.approvalId,
        action: 'approve',
        by: 'alice',
        reason: 'checked',
      });
      const r = await store.decide(reserve('run-retry', key));
      expectVerdict(r, 'allow');
      retry = r;
      await store.recordOutcome({ ...outcome(r, key, 'succeeded'), replayed: true });
      expectVerdict(await store.decide(reserve('run-late', key)), 'duplicate');
    } finally {
      await store.close();
    }
  }, 120_000);

  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('prints intent and state on top, then the timeline with parents, reasons and the replay', async () => {
    const { code, stdout, stderr } = await runCli(['trail', first.operationId, '--store', url]);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const lines = stdout.trimEnd().split('\n');
    expect(lines[0]).toBe(`operation ${first.operationId}  SUCCEEDED  tool github.create_issue`);
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(100);
    expect(stdout).not.toContain('\u001b['); // not a terminal: no colour
    const text = stdout.replace(/\n {26}/g, ' ');
    expect(text).toContain(`Idempotency-Key: ${first.operationId}`);
    expect(text).toContain('attempt #1 sent_no_response');
    expect(text).toContain('observation reconciliation: none');
    expect(text).toContain('decision hold (outcome_unknown)');
    expect(text).toContain('approval approved by alice: checked');
    expect(text).toContain('retry of #1: reason response_lost_after_dispatch, decision operator_approved');
    expect(text).toContain('replayed by the destination');
    expect(text).toContain('decision duplicate');
    expect(text).toContain('skipped as a duplicate of this operation');
  }, 60_000);

  it('--json prints the same report as the admin API', async () => {
    const { code, stdout } = await runCli(['trail', first.operationId, '--json', '--store', url]);
    expect(code).toBe(0);
    const report = JSON.parse(stdout) as {
      operation: { id: string; state: string };
      trail: { timeline: { type: string; attempt_id?: string; retry_of_attempt_id?: string }[] };
    };
    expect(report.operation).toMatchObject({ id: first.operationId, state: 'succeeded' });
    const attempts = report.trail.timeline.filter((e) => e.type === 'attempt');
    expect(attempts.map((a) => a.attempt_id)).toEqual([first.attemptId, retry.attemptId]);
    expect(attempts[1]?.retry_of_attempt_id).toBe(first.attemptId);
  }, 60_000);

  it('--run lists a run’s decisions, duplicates linked to their source', async () => {
    const { code, stdout } = await runCli(['trail', '--run', 'run-late', '--store', url]);
    expect(code).toBe(0);
    expect(stdout.replace(/\n {26}/g, ' ')).toContain(`duplicate of operation ${first.operationId}`);
  }, 60_000);

  it('--tool with --key finds the operation by its key values', async () => {
    const { code, stdout } = await runCli([
      'trail',
      '--tool',
      'github.create_issue',
      '--key',
      '["acme","app","title"]',
      '--json',
      '--store',
      url,
    ]);
    expect(code).toBe(0);
    expect((JSON.parse(stdout) as { operation: { id: string } }).operation.id).toBe(first.operationId);
  }, 60_000);

  it('refuses bad usage and names a missing operation', async () => {
    expect((await runCli(['trail', '--store', url])).code).toBe(2);
    expect((await runCli(['trail', '--tool', 'x', '--store', url])).code).toBe(2);
    const missing = await runCli(['trail', 'no-such-op', '--store', url]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('EG_ERR_NOT_FOUND');
    const badKey = await runCli(['trail', '--tool', 'x', '--key', 'nope', '--store', url]);
    expect(badKey.code).toBe(1);
    expect(badKey.stderr).toContain('EG_ERR_CONFIG_INVALID');
  }, 60_000);
});
