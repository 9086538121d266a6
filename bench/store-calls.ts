/**
 * The real store calls, timed from a bare client with no proxy around them: `decide` for a fresh
 * key (allow), `recordOutcome` (confirm), and `decide` for a confirmed key from a new run
 * (duplicate). Sequential, one connection, on the store the scenarios use. This is the reference
 * that separates "the store call costs more than a `select 1`" from "the proxy adds time".
 */
import { createHash, randomBytes } from 'node:crypto';
import {
  type DecideResult,
  type OutcomeInput,
  openStore,
  type ReserveInput,
  type Store,
  uuidv7,
} from '../src/store/index.js';
import { percentileOf } from './load.js';

export interface StoreCallTimes {
  readonly store: 'postgres' | 'pglite';
  readonly samples: number;
  readonly decideAllowP50Ms: number;
  readonly recordOutcomeP50Ms: number;
  readonly decideDuplicateP50Ms: number;
  readonly decideAllowP99Ms: number;
  readonly recordOutcomeP99Ms: number;
  readonly decideDuplicateP99Ms: number;
}

const sha = (s: string): string => `sha256:${createHash('sha256').update(s).digest('hex')}`;

/** The probe's proposal for `title` (its key is `title`'s, its fingerprint random per call). */
export function reserveInput(title: string, runId: string): ReserveInput {
  return {
    kind: 'reserve',
    decisionId: uuidv7(),
    runId,
    step: null,
    worker: null,
    agentVersion: null,
    // Its own scope, so the probe never shares a key with the scenarios.
    scope: { tenant: 'bench-probe', area: 'default', agent: 'agent' },
    toolId: 'bench.create_issue',
    explain: 'POST 127.0.0.1 /repos/{owner}/{repo}/issues',
    maxDuplicateSkips: 1_000_000,
    request: {
      scheme: 'http',
      method: 'POST',
      host: '127.0.0.1',
      port: 80,
      path: '/repos/acme/api/issues',
      route: 'POST 127.0.0.1 /repos/{owner}/{repo}/issues',
      fingerprint: sha(`${title}${randomBytes(4).toString('hex')}`),
      authorityRef: null,
    },
    key: {
      hash: sha(`probe ${title}`),
      values: ['acme', 'api', title],
      windowMs: 86_400_000,
      pendingTtlMs: 120_000,
    },
    keyError: null,
    newOperationId: uuidv7(),
    newAttemptId: uuidv7(),
    idempotencyHeader: 'Idempotency-Key',
    retryBudget: 3,
    unknownRule: 'hold',
    onExpired: 'unknown',
    claimedOperationId: null,
    clientRetryReason: null,
    reconciliation: null,
    gateInstance: null,
    deadlineMs: 108_000,
    recordPending: false,
  };
}

/** The success of the probe's allowed proposal for `title`: confirms its key. */
export function confirmInput(
  allow: Extract<DecideResult, { verdict: 'allow' }>,
  title: string,
): OutcomeInput {
  return {
    operationId: allow.operationId,
    attemptId: allow.attemptId,
    decisionId: allow.decisionId,
    keyHash: sha(`probe ${title}`),
    windowMs: 86_400_000,
    dispatchState: 'response_received',
    operationState: 'succeeded',
    status: 201,
    responseFingerprint: sha(title),
    destinationRef: 'http://127.0.0.1/acme/api/issues/1',
    replayed: null,
    durationMs: 0.1,
    error: null,
  };
}

async function allowAndConfirm(store: Store, title: string): Promise<[number, number]> {
  const t0 = performance.now();
  const r = await store.decide(reserveInput(title, 'bench-probe'));
  const t1 = performance.now();
  if (r.verdict !== 'allow') throw new Error(`bench: store probe expected allow, got ${r.verdict}`);
  await store.recordOutcome(confirmInput(r, title));
  return [t1 - t0, performance.now() - t1];
}

/** `n` sequential allows: decide for a fresh key (`issue <i>`), then its outcome. */
export async function runAllows(store: Pick<Store, 'decide' | 'recordOutcome'>, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const d = await store.decide(reserveInput(`issue ${i}`, 'run'));
    if (d.verdict !== 'allow') throw new Error(`expected allow, got ${d.verdict}`);
    await store.recordOutcome(confirmInput(d, `issue ${i}`));
  }
}

/**
 * `n` sequential allows of a keyless tool (no duplicate key: every proposal is a new operation),
 * then each one's outcome. A keyless outcome has no key row to be answered from, so it takes the
 * general path, which brings its operation's rows up to date first (eg_project_operation.sql).
 */
export async function runKeylessAllows(
  store: Pick<Store, 'decide' | 'recordOutcome'>,
  n: number,
): Promise<void> {
  for (let i = 0; i < n; i++) {
    const d = await store.decide({ ...reserveInput(`keyless ${i}`, 'run'), key: null });
    if (d.verdict !== 'allow') throw new Error(`expected allow, got ${d.verdict}`);
    await store.recordOutcome({ ...confirmInput(d, `keyless ${i}`), keyHash: null, windowMs: null });
  }
}

/** `n` sequential duplicates of the first 50 keys `runAllows` confirmed, each in its own run. */
export async function runDuplicates(store: Pick<Store, 'decide'>, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const d = await store.decide(reserveInput(`issue ${i % 50}`, `dup-${i}`));
    if (d.verdict !== 'duplicate') throw new Error(`expected duplicate, got ${d.verdict}`);
  }
}

/** Opens `url` (migrating it), times `samples` of each call after a warm-up, closes it. */
export async function measureStoreCalls(
  kind: 'postgres' | 'pglite',
  url: string,
  samples = 1_000,
): Promise<StoreCallTimes> {
  const store = await openStore({ url, migrate: true });
  try {
    const tag = randomBytes(4).toString('hex');
    const dupTitle = `probe ${tag} duplicate`;
    await allowAndConfirm(store, dupTitle);
    const allow = new Float64Array(samples);
    const record = new Float64Array(samples);
    const dup = new Float64Array(samples);
    const warmup = Math.ceil(samples / 10);
    for (let i = -warmup; i < samples; i++) {
      const [a, r] = await allowAndConfirm(store, `probe ${tag} ${i}`);
      const t0 = performance.now();
      const d = await store.decide(reserveInput(dupTitle, `bench-probe-${tag}-${i}`));
      const t1 = performance.now();
      if (d.verdict !== 'duplicate')
        throw new Error(`bench: store probe expected duplicate, got ${d.verdict}`);
      if (i < 0) continue;
      allow[i] = a;
      record[i] = r;
      dup[i] = t1 - t0;
    }
    return {
      store: kind,
      samples,
      decideAllowP50Ms: percentileOf(allow, 0.5),
      recordOutcomeP50Ms: percentileOf(record, 0.5),
      decideDuplicateP50Ms: percentileOf(dup, 0.5),
      decideAllowP99Ms: percentileOf(allow, 0.99),
      recordOutcomeP99Ms: percentileOf(record, 0.99),
      decideDuplicateP99Ms: percentileOf(dup, 0.99),
    };
  } finally {
    await store.close();
  }
}
