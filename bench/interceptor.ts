/**
 * The in-process front door: what `gateInterceptor` costs on a request no tool governs.
 *
 * - Against the loopback upstream child: the same bounded closed loop as every other scenario,
 *   N requests in flight, through `new Agent()`, `new Agent().compose(noopInterceptor)` and
 *   `new Agent().compose(gateInterceptor(gate))`. Their difference in the bench process's own CPU
 *   per request is the interceptor's cost inside a real request.
 * - Alone: a bounded loop of synchronous dispatches of the same request to a next dispatcher that
 *   does nothing (`() => true`): bare, through a no-op interceptor, through `gateInterceptor`. The
 *   difference is the pure per-request overhead, free of socket and scheduler noise.
 *
 * The gate is a real one: `createGate` with bench/policies on `pglite:memory` (never reached by
 * an ungoverned request).
 */
import { Agent, type Dispatcher } from 'undici';
import type { Gate } from '../src/engine/index.js';
import { createGate } from '../src/engine/index.js';
import { openStore, type Store } from '../src/store/index.js';
import { gateInterceptor } from '../src/undici/index.js';
import type { ScenarioResult } from './load.js';
import { issueBody, type ScenarioSpec, UNGOVERNED_PATH } from './scenarios.js';

export interface InProcessGate {
  readonly gate: Gate;
  close(): Promise<void>;
}

export async function openInProcessGate(policies: string): Promise<InProcessGate> {
  const store: Store = await openStore({ url: 'pglite:memory' });
  try {
    const gate = await createGate({
      policies,
      store,
      scope: { tenant: 'bench', area: 'bench', agent: 'bench-interceptor' },
    });
    return { gate, close: () => store.close() };
  } catch (err) {
    await store.close();
    throw err;
  }
}

const noopInterceptor: Dispatcher.DispatcherComposeInterceptor =
  (dispatch) =>
  (opts, handler): boolean =>
    dispatch(opts, handler);

export type InterceptorVariant = 'plain Agent' | 'noop interceptor' | 'gateInterceptor';
export const INTERCEPTOR_VARIANTS: readonly InterceptorVariant[] = [
  'plain Agent',
  'noop interceptor',
  'gateInterceptor',
];

/** One closed-loop scenario per variant, `inFlight` requests at a time, to a path no tool matches. */
export function interceptorScenario(
  variant: InterceptorVariant,
  gate: Gate,
  upstreamPort: number,
  inFlight: number,
): ScenarioSpec {
  const origin = `http://127.0.0.1:${upstreamPort}`;
  const body = issueBody('ungoverned request through the in-process interceptor');
  const agent = (): Dispatcher => {
    const a = new Agent({ connections: inFlight, keepAliveTimeout: 30_000 });
    if (variant === 'plain Agent') return a;
    return a.compose(variant === 'noop interceptor' ? noopInterceptor : gateInterceptor(gate));
  };
  return {
    kind: 'interceptor-ungoverned',
    store: 'none',
    label: `in-process: ${variant}`,
    name: `in-process ${variant}`,
    connections: inFlight,
    origin,
    dispatcher: agent,
    request: (): Dispatcher.RequestOptions => ({
      origin,
      method: 'POST',
      path: UNGOVERNED_PATH,
      headers: { 'content-type': 'application/json' },
      body,
    }),
    expect: { status: 201, verdict: null },
  };
}

/**
 * The interceptor alone: `count` (at most, and at most `durationMs`) synchronous dispatches to a
 * no-op next dispatcher, after a warm-up. Returns a result whose "requests" are dispatches.
 */
export function measureDispatchLoop(
  variant: InterceptorVariant,
  gate: Gate,
  upstreamPort: number,
  durationMs: number,
  count: number,
): ScenarioResult {
  const next: Dispatcher.Dispatch = () => true;
  const dispatch =
    variant === 'plain Agent'
      ? next
      : variant === 'noop interceptor'
        ? noopInterceptor(next)
        : gateInterceptor(gate)(next);
  const opts: Dispatcher.DispatchOptions = {
    origin: `http://127.0.0.1:${upstreamPort}`,
    method: 'POST',
    path: UNGOVERNED_PATH,
    headers: { 'content-type': 'application/json', 'content-length': '1000' },
  };
  const handler: Dispatcher.DispatchHandler = {};
  let sink = 0;
  const loop = (deadline: number, cap: number): number => {
    let n = 0;
    while (n < cap) {
      for (let i = 0; i < 10_000; i++) if (dispatch(opts, handler)) sink++;
      n += 10_000;
      if (performance.now() >= deadline) break;
    }
    return n;
  };
  loop(performance.now() + Math.min(500, durationMs), count);
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const n = loop(t0 + durationMs, count);
  const cpu = process.cpuUsage(cpu0);
  const seconds = (performance.now() - t0) / 1000;
  if (sink === 0) throw new Error('bench: the dispatch loop did nothing');
  return {
    name: `interceptor alone: ${variant === 'plain Agent' ? 'bare next dispatch' : variant}`,
    connections: 1,
    requests: n,
    errors: 0,
    seconds,
    rps: n / seconds,
    p50Ms: Number.NaN,
    p99Ms: Number.NaN,
    meanMs: (seconds * 1000) / n,
    selfCpuUsPerRequest: (cpu.user + cpu.system) / n,
    firstError: null,
  };
}
