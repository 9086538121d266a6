/**
 * What every fault case needs around the gate: the gate in process behind the real forward proxy
 * (or the built CLI as a child process), agents that propose through it, the bounded load loop,
 * polling the store, and the recorder that turns a case's checks and the ledger checker's figures
 * into one result row and one assertion.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ProxyAgent, request } from 'undici';
import { expect, onTestFinished } from 'vitest';
import { type CloseReport, createGate, type Gate } from '../../src/engine/index.js';
import { createProxyServer, type ProxyServer } from '../../src/proxy/index.js';
import type { KyselyStore } from '../../src/store/kysely-store.js';
import { openKyselyStore } from '../../src/store/open-store.js';
import type { AttemptRecord, Store } from '../../src/store/types.js';
import { type ProxyProcess, startProxyProcess } from '../helpers/proxy-process.js';
import { openTestStore, type StoreTarget, type TestStore } from '../helpers/store.js';
import { faultCase, LONG_VARIANT, type StoreKind, writeFaultResult } from './fault-cases.js';
import { checkLedger, formatFigures, type LedgerCheck, readTrail } from './ledger-check.js';
import type { LedgerDestination } from './ledger-destination.js';

export const POLICIES = new URL('./fixtures/policies/', import.meta.url).pathname;
export const SCOPE = { tenant: 'acme', area: 'payments', agent: 'fault-agent' } as const;

/** The destination collections, one per unknown-outcome rule (fixtures/policies/tools.yaml). */
export const COLLECTIONS = ['held', 'honored', 'reconciled'] as const;
export type Collection = (typeof COLLECTIONS)[number];
export const TOOL_OF: Record<string, string> = {
  held: 'fault.held',
  honored: 'fault.honored',
  reconciled: 'fault.reconciled',
};
export const toolOf = (collection: string): string => TOOL_OF[collection] ?? `unknown:${collection}`;
export const honors = (collection: string): boolean => collection === 'honored';

/** pending_ttl of every fixture tool, and how long to wait to be surely past it. */
export const PENDING_TTL_MS = 1_000;
export const PAST_TTL_MS = PENDING_TTL_MS + 300;

// ---------------------------------------------------------------------------------------------
// The gate in process, behind the real forward proxy.

export interface InProcessGate {
  readonly gate: Gate;
  readonly proxyUrl: string;
  /** Stops the proxy, then the gate (drain); the report is what the gate could not finish. */
  close(): Promise<CloseReport>;
}

export interface InProcessGateOptions {
  /** A store URL (the gate opens and owns it) or an open store (the test keeps it). */
  readonly store: Store | string;
  readonly instanceId: string;
  readonly heartbeatMs?: number;
  readonly staleAfterMs?: number;
  readonly drainTimeoutMs?: number;
}

export async function startInProcessGate(options: InProcessGateOptions): Promise<InProcessGate> {
  const gate = await createGate({
    policies: POLICIES,
    store: options.store,
    scope: SCOPE,
    instanceId: options.instanceId,
    heartbeatMs: options.heartbeatMs ?? 1_000,
    staleAfterMs: options.staleAfterMs ?? 30_000,
    drainTimeoutMs: options.drainTimeoutMs ?? 8_000,
  });
  let proxy: ProxyServer;
  try {
    proxy = createProxyServer({ gate, allowConnectPorts: [443, 80] });
  } catch (err) {
    await gate.close();
    throw err;
  }
  const addr = await proxy.listen('127.0.0.1', 0);
  let closing: Promise<CloseReport> | null = null;
  return {
    gate,
    proxyUrl: `http://127.0.0.1:${addr.port}`,
    close() {
      closing ??= proxy.close().then(() => gate.close());
      return closing;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Agents.

export interface Answer {
  /** HTTP status, or 0 when the request failed without one (connection error, timeout). */
  readonly status: number;
  readonly verdict: string | null;
  readonly operationId: string | null;
  readonly json: Record<string, unknown>;
  readonly error: string | null;
}

/** An agent: its own connection pool to the proxy, as a separate process would have. */
export class AgentClient {
  readonly #dispatcher: ProxyAgent;

  constructor(proxyUrl: string) {
    // Absolute-form requests (no CONNECT), as curl and Python send plain-HTTP targets.
    this.#dispatcher = new ProxyAgent({ uri: proxyUrl, proxyTunnel: false });
  }

  /** POSTs `{ order, amount: 1 }` to `collection` of the destination as run `run`. Never throws. */
  async propose(destUrl: string, collection: string, order: string, run: string): Promise<Answer> {
    try {
      const res = await request(`${destUrl}/${collection}/effects`, {
        method: 'POST',
        dispatcher: this.#dispatcher,
        headers: { 'content-type': 'application/json', 'effectgate-run': run },
        body: JSON.stringify({ order, amount: 1 }),
        headersTimeout: 15_000,
        bodyTimeout: 15_000,
      });
      const text = await res.body.text();
      let json: Record<string, unknown> = {};
      try {
        json = text === '' ? {} : (JSON.parse(text) as Record<string, unknown>);
      } catch {
        json = { text };
      }
      const header = (name: string): string | null => {
        const v = res.headers[name];
        return typeof v === 'string' ? v : null;
      };
      return {
        status: res.statusCode,
        verdict:
          header('effectgate-verdict') ?? (typeof json['verdict'] === 'string' ? json['verdict'] : null),
        operationId:
          header('effectgate-operation') ??
          (typeof json['operation_id'] === 'string' ? json['operation_id'] : null),
        json,
        error: null,
      };
    } catch (err) {
      return { status: 0, verdict: null, operationId: null, json: {}, error: String(err) };
    }
  }

  close(): Promise<void> {
    return this.#dispatcher.close().catch(() => undefined);
  }
}

/** `201`, `409 duplicate`, `409 pending`, `503`, `error`: how the answers are counted. */
export function answerLabel(a: Answer): string {
  if (a.status === 0) return 'error';
  return a.status === 409 && a.verdict !== null ? `409 ${a.verdict}` : String(a.status);
}

// ---------------------------------------------------------------------------------------------
// The bounded load loop: many keys, 2–3 runs per key, agents that retry.

export interface LoadOptions {
  readonly proxyUrl: string;
  readonly destUrl: string;
  readonly prefix: string;
  readonly keys: number;
  readonly agents: number;
  /** Task start times are spread evenly over this window (so the load covers a whole fault). */
  readonly spreadMs: number;
  /** Proposals one task makes at most (503, pending, 502/504 and errors are retried). */
  readonly maxTries: number;
  /**
   * No new proposal after this long. Retries back off (30 ms doubling to 400 ms), so a task keeps
   * trying through the whole fault and after it: one still unsettled at the deadline is stuck.
   */
  readonly deadlineMs: number;
}

export interface LoadResult {
  readonly keys: number;
  readonly tasks: number;
  readonly requests: number;
  /** Tasks still retrying when their tries or the deadline ran out. */
  readonly unsettled: number;
  /** The first few of them: key and the last answer it got. */
  readonly unsettledExamples: readonly string[];
  readonly answers: Record<string, number>;
}

interface Task {
  readonly order: string;
  readonly collection: Collection;
  readonly run: string;
  readonly startAt: number;
}

/** Answers after which an agent stops: the effect was made, is known, or needs a person. */
function settles(a: Answer): boolean {
  if (a.status >= 200 && a.status < 300) return true;
  if (a.status === 409) return a.verdict !== 'pending';
  return a.status === 428 || a.status === 429 || a.status === 403 || a.status === 422;
}

export async function runLoad(o: LoadOptions): Promise<LoadResult> {
  const t0 = Date.now();
  const tasks: Task[] = [];
  for (let k = 0; k < o.keys; k++) {
    const collection = COLLECTIONS[k % COLLECTIONS.length]!;
    // Proposers of one key sit next to each other in the queue: different agents take them at
    // nearly the same moment, so they contend for the reservation.
    const proposers = 2 + (k % 2);
    for (let p = 0; p < proposers; p++) {
      tasks.push({
        order: `${o.prefix}-${k}`,
        collection,
        run: `${o.prefix}-run-${p}-${k}`,
        startAt: t0 + Math.floor((o.spreadMs * k) / o.keys),
      });
    }
  }
  const answers: Record<string, number> = {};
  let next = 0;
  let requests = 0;
  let unsettled = 0;
  const unsettledExamples: string[] = [];
  const deadline = t0 + o.deadlineMs;
  const agents = Array.from({ length: o.agents }, () => new AgentClient(o.proxyUrl));
  try {
    await Promise.all(
      agents.map(async (agent) => {
        for (;;) {
          const task = tasks[next++];
          if (task === undefined) return;
          const wait = task.startAt - Date.now();
          if (wait > 0) await sleep(wait);
          let settled = false;
          let label = 'never sent';
          for (let tries = 0; tries < o.maxTries && Date.now() < deadline; tries++) {
            const a = await agent.propose(o.destUrl, task.collection, task.order, task.run);
            requests += 1;
            label = answerLabel(a);
            answers[label] = (answers[label] ?? 0) + 1;
            if (settles(a)) {
              settled = true;
              break;
            }
            // A naive agent: it retries whatever the gate said, a little later each time.
            const backoff = Math.min(30 * 2 ** Math.min(tries, 4), 400);
            await sleep(backoff + Math.floor(Math.random() * 30));
          }
          if (!settled) {
            unsettled += 1;
            if (unsettledExamples.length < 5)
              unsettledExamples.push(`${task.collection} ${task.order}: last ${label}`);
          }
        }
      }),
    );
  } finally {
    await Promise.all(agents.map((a) => a.close()));
  }
  return { keys: o.keys, tasks: tasks.length, requests, unsettled, unsettledExamples, answers };
}

// ---------------------------------------------------------------------------------------------
// Stores.

/** A fresh PostgreSQL database (direct, never through a relay) or an in-memory PGlite. */
export function openFaultStore(target: StoreTarget): Promise<TestStore> {
  return openTestStore(target);
}

/** Polls `fn` every 50 ms until it returns a value other than `undefined`, or `timeoutMs` passes. */
export async function poll<T>(fn: () => Promise<T | undefined>, timeoutMs: number): Promise<T | undefined> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > until) return undefined;
    await sleep(50);
  }
}

/** The attempts of `operationId` once all of them have an outcome; `undefined` after `timeoutMs`. */
export function outcomeRecorded(
  store: Store,
  operationId: string,
  timeoutMs: number,
): Promise<readonly AttemptRecord[] | undefined> {
  return poll(async () => {
    const op = await store.getOperation(operationId);
    if (op === null || op.attempts.length === 0) return undefined;
    return op.attempts.every((a) => a.dispatchState !== null) ? op.attempts : undefined;
  }, timeoutMs);
}

// ---------------------------------------------------------------------------------------------
// The CLI gate (a child process that can be SIGKILLed), on PostgreSQL or `pglite:DIR`.

export interface CliStore {
  readonly url: string;
  /** Opens the store for the checker (PGlite: only while no gate holds its directory). */
  open(): Promise<Store>;
  dispose(): Promise<void>;
}

export async function cliStore(target: StoreTarget): Promise<CliStore> {
  if (target.kind === 'postgres') {
    const pg = await openTestStore(target);
    return { url: pg.url, open: async () => pg, dispose: () => pg.close() };
  }
  const dir = mkdtempSync(join(tmpdir(), 'effectgate-fault-'));
  const url = `pglite:${join(dir, 'store')}`;
  let opened: KyselyStore | null = null;
  return {
    url,
    async open() {
      opened ??= await openKyselyStore({ url, migrate: false });
      return opened;
    },
    async dispose() {
      await opened?.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function cliGateArgs(storeUrl: string, instanceId: string, extra: readonly string[] = []): string[] {
  return [
    '--policies',
    POLICIES,
    '--store',
    storeUrl,
    '--tenant',
    SCOPE.tenant,
    '--area',
    SCOPE.area,
    '--agent',
    SCOPE.agent,
    '--instance-id',
    instanceId,
    '--drain-timeout',
    '8s',
    ...extra,
  ];
}

export function startCliGate(args: readonly string[]): Promise<ProxyProcess> {
  return startProxyProcess(args);
}

// ---------------------------------------------------------------------------------------------
// One case's verdict: soft checks plus the ledger checker, one result row, one assertion.

export class CaseRecorder {
  readonly #case: string;
  readonly #store: StoreKind;
  readonly #started = Date.now();
  readonly #failures: string[] = [];
  readonly #answers: Record<string, number> = {};
  readonly #uncaught: string[] = [];
  readonly #onUncaught = (err: unknown): void => {
    this.#uncaught.push(err instanceof Error ? err.message : String(err));
  };

  constructor(caseId: string, store: StoreKind) {
    faultCase(caseId);
    this.#case = caseId;
    this.#store = store;
    // An exception nobody caught while the case runs (e.g. a driver 'error' event without a
    // listener) kills a real gate process: the row must say so, not only vitest's log.
    process.on('uncaughtException', this.#onUncaught);
    onTestFinished(() => {
      process.off('uncaughtException', this.#onUncaught);
    });
  }

  /** A promise of the case, checked without stopping it: the ledger is still compared afterwards. */
  check(ok: boolean, message: string): void {
    if (!ok) this.#failures.push(message);
  }

  answered(a: Answer): Answer {
    const label = answerLabel(a);
    this.#answers[label] = (this.#answers[label] ?? 0) + 1;
    return a;
  }

  count(answers: Readonly<Record<string, number>>): void {
    for (const [k, n] of Object.entries(answers)) this.#answers[k] = (this.#answers[k] ?? 0) + n;
  }

  /**
   * Compares the destination's ledger with the trail, writes the result row, logs the figures and
   * fails the test with every broken promise at once.
   */
  async finish(input: {
    readonly dest: LedgerDestination;
    readonly store: Store;
    readonly proposedKeys?: number;
    readonly strictUnknown: boolean;
  }): Promise<LedgerCheck> {
    const trail = await readTrail(input.store);
    const check = checkLedger({
      ledger: input.dest.ledger(),
      arrivals: input.dest.arrivals(),
      trail,
      toolOf,
      strictUnknown: input.strictUnknown,
      ...(input.proposedKeys === undefined ? {} : { proposedKeys: input.proposedKeys }),
    });
    process.off('uncaughtException', this.#onUncaught);
    if (this.#uncaught.length > 0) {
      const distinct = [...new Set(this.#uncaught)];
      this.#failures.push(
        `${this.#uncaught.length} uncaught exception(s) in the gate's process (a CLI gate would have crashed): ${distinct.slice(0, 3).join('; ')}`,
      );
    }
    const failures = [...this.#failures, ...check.violations];
    const c = faultCase(this.#case);
    writeFaultResult({
      case: this.#case,
      store: this.#store,
      variant: LONG_VARIANT ? 'long' : 'short',
      fault: c.fault,
      promise: c.promise,
      figures: check.figures,
      answers: { ...this.#answers },
      result: failures.length === 0 ? 'pass' : 'fail',
      failures,
      durationMs: Date.now() - this.#started,
      finishedAt: new Date().toISOString(),
    });
    const answers = Object.entries(this.#answers)
      .map(([k, n]) => `${k}×${n}`)
      .join(' ');
    console.info(
      `${formatFigures(`[fault ${this.#case} ${this.#store}]`, check.figures)}; answers ${answers}`,
    );
    expect(failures, `${this.#case} on ${this.#store}`).toEqual([]);
    return check;
  }
}
