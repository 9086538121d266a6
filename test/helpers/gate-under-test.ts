/**
 * The real `effectgate proxy` on a real store for one store target, with what an end-to-end test
 * of the trail needs around it: an undici client through the proxy (absolute form), the admin API
 * (bearer token), the CLI on the same store, restarts and a SIGKILL.
 *
 * Store per target: PGlite in a fresh temp directory (`pglite:DIR`), or a fresh PostgreSQL
 * database (dropped on close). `cli` runs beside the running gate (on PGlite through the store
 * socket the gate serves); `whileStopped` runs commands with the gate stopped on PGlite (the
 * embedded store opened directly) and beside it on PostgreSQL.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProxyAgent, request } from 'undici';
import type { ApprovalRecord, ObservationRecord, OperationRecord } from '../../src/store/types.js';
import { type ProxyProcess, runCli, startProxyProcess } from './proxy-process.js';
import { openTestStore, type StoreTarget, type TestStore } from './store.js';

export interface Sent {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly json: Record<string, unknown>;
}

/** `GET /api/operations/:id`. */
export interface Trail {
  readonly operation: OperationRecord;
  readonly decisions: readonly { readonly verdict: string; readonly reason: string | null }[];
  readonly observations: readonly ObservationRecord[];
  readonly approvals: readonly ApprovalRecord[];
}

export interface GateUnderTest {
  readonly target: StoreTarget;
  readonly storeUrl: string;
  readonly proxy: ProxyProcess;
  /** Sends `method url` through the proxy in absolute form, JSON body, and reads the answer. */
  send(url: string, body: unknown, headers?: Record<string, string>, method?: string): Promise<Sent>;
  /** Calls the admin API with the bearer token. */
  api(path: string, init?: { method?: string; body?: unknown }): Promise<Sent>;
  trail(operationId: string): Promise<Trail>;
  /** Runs `effectgate <args> --store <this store>`. */
  cli(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }>;
  /** Stops the gate (SIGTERM) for the embedded store, runs `fn`, starts it again; on PostgreSQL runs `fn` alongside. */
  whileStopped<T>(fn: () => Promise<T>): Promise<T>;
  /** Approves an approval card: the CLI beside the gate on PostgreSQL, the admin API on PGlite. */
  approve(approvalId: string, by: string, reason: string): Promise<ApprovalRecord>;
  /** SIGKILL: no drain, no stopInstance, the lock file left behind. */
  kill(): Promise<void>;
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
}

export const ADMIN_TOKEN = `admin-${randomBytes(12).toString('hex')}`;

export async function startGateUnderTest(
  target: StoreTarget,
  policies: string,
  options: {
    readonly extraArgs?: readonly string[];
    /** Another gate's store (PostgreSQL: a second replica on the same database); not dropped on close. */
    readonly storeUrl?: string;
  } = {},
): Promise<GateUnderTest> {
  const extraArgs = options.extraArgs ?? [];
  const dir = mkdtempSync(join(tmpdir(), 'effectgate-unknown-'));
  let pgStore: TestStore | null = null;
  let storeUrl: string;
  if (options.storeUrl !== undefined) {
    storeUrl = options.storeUrl;
  } else if (target.kind === 'postgres') {
    pgStore = await openTestStore(target);
    storeUrl = pgStore.url;
    // The test's own handle is not needed beyond creating (and later dropping) the database.
  } else {
    storeUrl = `pglite:${join(dir, 'store')}`;
  }
  const args = [
    '--policies',
    policies,
    '--store',
    storeUrl,
    '--admin',
    '127.0.0.1:0',
    '--tenant',
    'acme',
    '--area',
    'support',
    '--agent',
    'triage-bot',
    // Shared PostgreSQL: a killed gate's heartbeat goes stale within a second, and the survivors'
    // sweep (every 6 beats) recovers its attempts.
    '--heartbeat',
    '200ms',
    '--stale-after',
    '1s',
    ...extraArgs,
  ];
  let proxy: ProxyProcess | null = null;
  let agent: ProxyAgent | null = null;
  const env = { EFFECTGATE_ADMIN_TOKEN: ADMIN_TOKEN };

  const current = (): ProxyProcess => {
    if (proxy === null) throw new Error('the gate is not running');
    return proxy;
  };
  const start = async (): Promise<void> => {
    if (proxy !== null) throw new Error('the gate is already running');
    proxy = await startProxyProcess(args, env);
    // The gate prints its listening lines a moment before it installs its SIGTERM handler (see the
    // report on that race): one answered admin request proves that moment has passed, so a test
    // that stops the gate right away still gets a graceful stop.
    const ready = await request(`${proxy.adminUrl}/readyz`);
    await ready.body.text();
    if (ready.statusCode !== 200) throw new Error(`the gate is not ready: ${ready.statusCode}`);
    // proxyTunnel: false sends plain-HTTP targets in absolute form, as curl and Python do.
    agent = new ProxyAgent({ uri: proxy.url, proxyTunnel: false });
  };
  const dropAgent = async (): Promise<void> => {
    const a = agent;
    agent = null;
    await a?.destroy().catch(() => undefined);
  };
  const stop = async (): Promise<void> => {
    await dropAgent();
    const p = proxy;
    proxy = null;
    if (p !== null) {
      const code = await p.stop();
      if (code !== 0) {
        throw new Error(`the gate exited with ${code ?? p.child.signalCode} on SIGTERM\n${p.stderr()}`);
      }
    }
  };
  const cli = (cliArgs: readonly string[]) => runCli([...cliArgs, '--store', storeUrl]);
  const api = async (path: string, init: { method?: string; body?: unknown } = {}): Promise<Sent> => {
    const adminUrl = current().adminUrl;
    if (adminUrl === null) throw new Error('no admin server');
    const res = await request(`${adminUrl}${path}`, {
      method: (init.method ?? 'GET') as 'GET',
      headers: {
        authorization: `Bearer ${ADMIN_TOKEN}`,
        ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
    });
    const text = await res.body.text();
    return { status: res.statusCode, headers: res.headers, json: text ? JSON.parse(text) : {} };
  };

  await start();

  return {
    target,
    storeUrl,
    get proxy() {
      return current();
    },
    async send(url, body, headers = {}, method = 'POST') {
      if (agent === null) throw new Error('the gate is not running');
      const res = await request(url, {
        method: method as 'POST',
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
    },
    api,
    async trail(operationId) {
      const r = await api(`/api/operations/${operationId}`);
      if (r.status !== 200)
        throw new Error(`GET /api/operations/${operationId}: ${r.status} ${JSON.stringify(r.json)}`);
      return r.json as unknown as Trail;
    },
    cli,
    async whileStopped(fn) {
      if (target.kind === 'postgres') return fn();
      await stop();
      try {
        return await fn();
      } finally {
        await start();
      }
    },
    async approve(approvalId, by, reason) {
      if (target.kind === 'postgres') {
        const r = await cli(['approvals', 'approve', approvalId, '--by', by, '--reason', reason, '--json']);
        if (r.code !== 0) throw new Error(`approvals approve exited ${r.code}: ${r.stderr}`);
        return JSON.parse(r.stdout) as ApprovalRecord;
      }
      const r = await api(`/api/approvals/${approvalId}/approve`, { method: 'POST', body: { by, reason } });
      if (r.status !== 200) throw new Error(`approve ${approvalId}: ${r.status} ${JSON.stringify(r.json)}`);
      return r.json as unknown as ApprovalRecord;
    },
    async kill() {
      await dropAgent();
      const p = current();
      proxy = null;
      const signal = await p.stop('SIGKILL').then(() => p.child.signalCode);
      if (signal !== 'SIGKILL') throw new Error(`the gate did not die of SIGKILL (${signal})`);
    },
    stop,
    start,
    async close() {
      const running = proxy;
      try {
        // Never masks the test's own failure; a gate that does not stop within 15 s is killed.
        const timer = setTimeout(() => running?.child.kill('SIGKILL'), 15_000);
        await stop().catch(() => undefined);
        clearTimeout(timer);
      } finally {
        await pgStore?.close();
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
