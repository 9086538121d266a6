/**
 * The request shapes of each scenario. Every request is a ~1 KB JSON POST; through the proxy it is
 * sent in absolute form (`POST http://127.0.0.1:UP/repos/acme/api/issues`), as a forward proxy
 * receives plain-HTTP requests, with `Host` naming the destination.
 */
import type { Dispatcher } from 'undici';
import type { LoadScenario } from './load.js';

export type ScenarioKind = 'direct' | 'ungoverned' | 'allow' | 'duplicate';
export type StoreKind = 'none' | 'pglite' | 'postgres';

export interface ScenarioSpec extends LoadScenario {
  readonly kind: ScenarioKind;
  readonly store: StoreKind;
}

export const ISSUES_PATH = '/repos/acme/api/issues';
/** Matches no tool in bench/policies: streamed through, never reaches the store. */
export const UNGOVERNED_PATH = '/repos/acme/api/comments';

const PADDING = 'lorem ipsum dolor sit amet '.repeat(40).slice(0, 960);

/** `{"title": …, "body": "<padding>"}`, about 1 KB. */
export function issueBody(title: string): string {
  return JSON.stringify({ title, body: PADDING });
}

const JSON_TYPE = 'application/json';

interface Target {
  readonly proxyPort: number;
  readonly upstreamPort: number;
  readonly connections: number;
}

export function directScenario(upstreamPort: number, connections: number): ScenarioSpec {
  const body = issueBody('direct request to the upstream');
  return {
    kind: 'direct',
    store: 'none',
    name: 'direct',
    connections,
    origin: `http://127.0.0.1:${upstreamPort}`,
    request: (): Dispatcher.RequestOptions => ({
      method: 'POST',
      path: ISSUES_PATH,
      headers: { 'content-type': JSON_TYPE },
      body,
    }),
    expect: { status: 201, verdict: null },
  };
}

function proxied(
  t: Target,
  path: string,
  headers: Record<string, string>,
  body: string,
): Dispatcher.RequestOptions {
  return {
    method: 'POST',
    path: `http://127.0.0.1:${t.upstreamPort}${path}`,
    headers: { host: `127.0.0.1:${t.upstreamPort}`, 'content-type': JSON_TYPE, ...headers },
    body,
  };
}

export function ungovernedScenario(t: Target): ScenarioSpec {
  const body = issueBody('ungoverned request through the proxy');
  return {
    kind: 'ungoverned',
    store: 'none',
    name: 'ungoverned',
    connections: t.connections,
    origin: `http://127.0.0.1:${t.proxyPort}`,
    request: (): Dispatcher.RequestOptions => proxied(t, UNGOVERNED_PATH, {}, body),
    expect: { status: 201, verdict: null },
  };
}

/** A fresh semantic key per request (unique title): every request is `allow`, two store round trips. */
export function allowScenario(t: Target, store: StoreKind, runTag: string): ScenarioSpec {
  return {
    kind: 'allow',
    store,
    name: `governed allow (${store})`,
    connections: t.connections,
    origin: `http://127.0.0.1:${t.proxyPort}`,
    request: (seq: number): Dispatcher.RequestOptions =>
      proxied(t, ISSUES_PATH, {}, issueBody(`bench ${runTag} issue ${seq}`)),
    expect: { status: 201, verdict: 'allow' },
  };
}

/**
 * The same key every time (primed once before): every request is `duplicate`, one store round
 * trip. Each request is its own run (`Effectgate-Run: bench-<n>`) so the loop breaker never halts.
 */
export function duplicateScenario(t: Target, store: StoreKind, runTag: string, title: string): ScenarioSpec {
  const body = issueBody(title);
  return {
    kind: 'duplicate',
    store,
    name: `governed duplicate (${store})`,
    connections: t.connections,
    origin: `http://127.0.0.1:${t.proxyPort}`,
    request: (seq: number): Dispatcher.RequestOptions =>
      proxied(t, ISSUES_PATH, { 'effectgate-run': `bench-${runTag}-${seq}` }, body),
    expect: { status: 409, verdict: 'duplicate' },
  };
}

/** The one request that makes `title` a confirmed key before the duplicate scenario. */
export function primeRequest(t: Target, runTag: string, title: string): Dispatcher.RequestOptions {
  return proxied(t, ISSUES_PATH, { 'effectgate-run': `bench-${runTag}-prime` }, issueBody(title));
}
