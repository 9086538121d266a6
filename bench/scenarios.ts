/**
 * The request shapes of each scenario. Every request is a ~1 KB JSON POST; through the proxy it is
 * sent in absolute form (`POST http://127.0.0.1:UP/repos/acme/api/issues`), as a forward proxy
 * receives plain-HTTP requests, with `Host` naming the destination.
 */
import { createSecureContext } from 'node:tls';
import { type Dispatcher, ProxyAgent } from 'undici';
import type { LoadScenario } from './load.js';

/** What BENCH_SCENARIOS can name. */
export const SCENARIO_NAMES = [
  'direct',
  'ungoverned',
  'hop',
  'squid',
  'floor',
  'floor-chained',
  'floor-events',
  'allow',
  'duplicate',
  'interceptor-ungoverned',
  'intercept-nomatch',
  'https-allow',
  'https-duplicate',
  'connect-tunnel',
] as const;
export type ScenarioName = (typeof SCENARIO_NAMES)[number];
/** The kind of a result row (`intercept-nomatch` runs both keep-alive and new-connection rows). */
export type ScenarioKind = ScenarioName | 'intercept-nomatch-newconn' | 'interceptor-alone';
export type StoreKind = 'none' | 'pglite' | 'postgres';

export interface ScenarioSpec extends LoadScenario {
  readonly kind: ScenarioKind;
  readonly store: StoreKind;
  /** The table's scenario column (defaults to one derived from `kind`). */
  readonly label?: string;
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

/**
 * The ungoverned request through a reference forward proxy at `proxyPort` (bench/hop-proxy.ts, the
 * bare undici hop; bench/squid-proxy.ts, Debian's squid), for the same request through the gate.
 */
export function referenceScenario(kind: 'hop' | 'squid', t: Target): ScenarioSpec {
  const body = issueBody('ungoverned request through the proxy');
  return {
    kind,
    store: 'none',
    label: kind === 'hop' ? 'reference: undici hop' : 'reference: squid',
    name: kind === 'hop' ? 'bare undici hop' : 'squid',
    connections: t.connections,
    origin: `http://127.0.0.1:${t.proxyPort}`,
    request: (): Dispatcher.RequestOptions => proxied(t, UNGOVERNED_PATH, {}, body),
    expect: { status: 201, verdict: null },
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

/** The floor rows' names: the plain floor, and with events chained as written or not. */
export const FLOOR_LABELS = {
  none: 'floor (prototype)',
  chained: 'floor + chained events',
  events: 'floor + unchained events',
} as const;

/**
 * The physical floor (bench/floor-proxy.ts, PostgreSQL only): the allow scenario's requests through
 * a plain proxy that makes one reservation round trip before and one confirmation after.
 */
export function floorScenario(
  t: Target,
  runTag: string,
  trail: 'chained' | 'events' | null = null,
): ScenarioSpec {
  return {
    kind: trail === null ? 'floor' : `floor-${trail}`,
    store: 'postgres',
    label: FLOOR_LABELS[trail ?? 'none'],
    name: `floor: 1 round trip before, 1 after${trail === null ? '' : `, each appending a ${trail} event`} (postgres)`,
    connections: t.connections,
    origin: `http://127.0.0.1:${t.proxyPort}`,
    request: (seq: number): Dispatcher.RequestOptions =>
      proxied(
        t,
        ISSUES_PATH,
        {},
        issueBody(`floor${trail === null ? '' : `-${trail}`} ${runTag} issue ${seq}`),
      ),
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

/** The HTTPS upstream child and the proxy started with `--ca-dir`, `--upstream-ca`, `--allow-connect-ports`. */
export interface TlsTarget {
  readonly proxyPort: number;
  readonly tlsUpstreamPort: number;
  readonly connections: number;
  /** Trusted by the client: the gate CA and the upstream's self-signed certificate. */
  readonly ca: readonly string[];
}

/**
 * A `ProxyAgent` to the proxy: CONNECT, then TLS to the destination inside the tunnel (terminated
 * by the gate when it intercepts, by the upstream itself when it tunnels).
 */
function proxyAgent(t: TlsTarget, sessionCache = true): () => Dispatcher {
  // One secure context for every connection: with `ca` alone, each TLS connection would build
  // (and parse the PEMs into) its own, which the load generator would pay per new connection.
  const secureContext = createSecureContext({ ca: [...t.ca] });
  return () =>
    new ProxyAgent({
      uri: `http://127.0.0.1:${t.proxyPort}`,
      // No TLS session cache for the new-connection case: every handshake is a full one.
      requestTls: sessionCache ? { secureContext } : { secureContext, maxCachedSessions: 0 },
      connections: t.connections,
      keepAliveTimeout: 30_000,
      headersTimeout: 30_000,
      bodyTimeout: 30_000,
    });
}

function overTls(
  t: TlsTarget,
  host: string,
  path: string,
  headers: Record<string, string>,
  body: string,
): Dispatcher.RequestOptions {
  return {
    origin: `https://${host}:${t.tlsUpstreamPort}`,
    method: 'POST',
    path,
    headers: { 'content-type': JSON_TYPE, ...headers },
    body,
  };
}

/**
 * HTTPS to 127.0.0.1 (a host the bench tool names, so the gate intercepts its TLS) on a path no
 * tool matches: the pure cost of interception. `fresh`: a new TCP connection, CONNECT and full TLS
 * handshake (no session resumption) per request, by sending `Connection: close` on each request.
 */
export function interceptNoMatchScenario(t: TlsTarget, fresh: boolean): ScenarioSpec {
  const body = issueBody('intercepted request that no tool matches');
  return {
    kind: fresh ? 'intercept-nomatch-newconn' : 'intercept-nomatch',
    store: 'none',
    label: fresh ? 'intercept-nomatch new-conn' : 'intercept-nomatch keep-alive',
    name: fresh ? 'intercept-nomatch new connection' : 'intercept-nomatch keep-alive',
    connections: t.connections,
    origin: `https://127.0.0.1:${t.tlsUpstreamPort}`,
    dispatcher: proxyAgent(t, !fresh),
    request: (): Dispatcher.RequestOptions =>
      overTls(t, '127.0.0.1', UNGOVERNED_PATH, fresh ? { connection: 'close' } : {}, body),
    expect: { status: 201, verdict: null },
  };
}

/**
 * Where the connect-tunnel scenario sends its HTTPS: the HTTPS upstream's second listener. Still
 * loopback (all of 127/8 is, on Linux), but an address of its own that no bench tool names, so the
 * gate relays the CONNECT. Not `localhost`: the gate takes it as a spelling of 127.0.0.1 and ::1,
 * which the bench tool governs, so TLS to it is intercepted.
 */
export const TUNNEL_HOST = '127.0.0.2';

/** HTTPS to TUNNEL_HOST (no tool names it): CONNECT relayed byte for byte, TLS end to end. */
export function connectTunnelScenario(t: TlsTarget): ScenarioSpec {
  const body = issueBody('tunnelled request to a host no tool names');
  return {
    kind: 'connect-tunnel',
    store: 'none',
    label: 'connect-tunnel keep-alive',
    name: 'connect-tunnel',
    connections: t.connections,
    origin: `https://${TUNNEL_HOST}:${t.tlsUpstreamPort}`,
    dispatcher: proxyAgent(t),
    request: (): Dispatcher.RequestOptions => overTls(t, TUNNEL_HOST, ISSUES_PATH, {}, body),
    expect: { status: 201, verdict: null },
  };
}

export function httpsAllowScenario(t: TlsTarget, store: StoreKind, runTag: string): ScenarioSpec {
  return {
    kind: 'https-allow',
    store,
    label: 'governed allow https',
    name: `governed allow over https (${store})`,
    connections: t.connections,
    origin: `https://127.0.0.1:${t.tlsUpstreamPort}`,
    dispatcher: proxyAgent(t),
    request: (seq: number): Dispatcher.RequestOptions =>
      overTls(t, '127.0.0.1', ISSUES_PATH, {}, issueBody(`bench ${runTag} https issue ${seq}`)),
    expect: { status: 201, verdict: 'allow' },
  };
}

export function httpsDuplicateScenario(
  t: TlsTarget,
  store: StoreKind,
  runTag: string,
  title: string,
): ScenarioSpec {
  const body = issueBody(title);
  return {
    kind: 'https-duplicate',
    store,
    label: 'governed duplicate https',
    name: `governed duplicate over https (${store})`,
    connections: t.connections,
    origin: `https://127.0.0.1:${t.tlsUpstreamPort}`,
    dispatcher: proxyAgent(t),
    request: (seq: number): Dispatcher.RequestOptions =>
      overTls(t, '127.0.0.1', ISSUES_PATH, { 'effectgate-run': `bench-${runTag}-${seq}` }, body),
    expect: { status: 409, verdict: 'duplicate' },
  };
}

/** Makes `title` a confirmed key over HTTPS before the HTTPS duplicate scenario. */
export async function primeOverTls(t: TlsTarget, runTag: string, title: string): Promise<void> {
  const agent = proxyAgent({ ...t, connections: 1 })();
  try {
    const res = await agent.request(
      overTls(
        t,
        '127.0.0.1',
        ISSUES_PATH,
        { 'effectgate-run': `bench-${runTag}-prime-https` },
        issueBody(title),
      ),
    );
    const text = await res.body.text();
    const verdict = res.headers['effectgate-verdict'];
    if (res.statusCode !== 201 || verdict !== 'allow')
      throw new Error(`bench: priming the https duplicate key got ${res.statusCode} ${verdict}: ${text}`);
  } finally {
    await agent.destroy();
  }
}
