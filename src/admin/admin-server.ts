import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { READ_BACK_FINGERPRINT_KEY } from '../engine/index.js';
import type { Store } from '../store/index.js';
import { handleAdminApi, problemOf } from './admin-api.js';
import { ADMIN_TOKEN_ENV, checkAdminAuth } from './admin-auth.js';
import { badRequest, HttpProblem, methodNotAllowed, notFound, sendJson, sendProblem } from './admin-http.js';
import { AdminRouter } from './admin-router.js';
import { createPrometheusMetrics, type PrometheusMetrics } from './metrics.js';
import { handleUi } from './ui/index.js';

export interface AdminServer {
  readonly server: Server;
  /** What `GET /metrics` serves (the one given in the options, or this server's own). */
  readonly metrics: PrometheusMetrics;
  listen(host: string, port: number): Promise<AddressInfo>;
  close(): Promise<void>;
}

/** Where the admin server reports failures it did not expect (never with the token). */
export interface AdminLogger {
  error(fields: Record<string, unknown>, message: string): void;
}

export interface AdminServerOptions {
  readonly store: Store;
  /**
   * Bearer token every `/api/*` request must present (`EFFECTGATE_ADMIN_TOKEN` or
   * `--admin-token-file`, see `resolveAdminToken`). `null`: the API answers 401 saying how to set
   * one; `/healthz` and `/readyz` stay open either way.
   */
  readonly token: string | null;
  readonly logger?: AdminLogger;
  /**
   * The gate's metrics, the same object given to `createGate({ metrics })`. Without it the server
   * makes its own registry, which then has the store and process metrics but no gate counters.
   */
  readonly metrics?: PrometheusMetrics;
  /**
   * The key of the fingerprints of payloads posted to `/api/…/observations`: the gate's
   * `gate.payloadKey`, so they compare with the gate's own read-backs. Default: the key a gate
   * without an authority key uses. The store holds no key to take it from.
   */
  readonly payloadKey?: string;
}

const REALM = 'Bearer realm="effectgate-admin"';

/**
 * The admin server, off the agent's path: `/healthz` (process up), `/readyz` (store reachable) and
 * `/metrics` (Prometheus text), open for probes and scrapers; the operations and approvals API under
 * `/api`, behind a bearer token.
 */
export function createAdminServer(options: AdminServerOptions): AdminServer {
  const metrics = options.metrics ?? createPrometheusMetrics({ store: options.store });
  const server = createServer((req, res) => {
    route(options, metrics, req, res).catch((err: unknown) => {
      const problem = problemOf(err);
      if (problem.status === 500)
        options.logger?.error({ error: messageOf(err) }, 'admin API request failed');
      if (res.headersSent) res.destroy();
      else sendProblem(req, res, problem);
    });
  });
  return {
    server,
    metrics,
    listen: (host, port) =>
      new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          resolve(server.address() as AddressInfo);
        });
      }),
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}

async function route(
  options: AdminServerOptions,
  metrics: PrometheusMetrics,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  // The timeline pages (/ui/*) parse their own URL and never throw.
  if (await handleUi(req, res, { store: options.store, token: options.token, logger: options.logger }))
    return;
  const { raw, query } = splitTarget(req.url ?? '');
  if (raw[0] === 'api') {
    // Authentication first: without the token nothing about the API is told, not even a bad path.
    authenticate(req, options.token);
    await handleAdminApi({
      store: options.store,
      payloadKey: options.payloadKey ?? READ_BACK_FINGERPRINT_KEY,
      req,
      res,
      segments: raw.slice(1).map(decodeSegment),
      query,
    });
    return;
  }
  const hit = PROBES.match(req.method, raw);
  if (hit.kind === 'not_found') throw notFound('No such admin route.');
  if (hit.kind === 'wrong_method') throw methodNotAllowed(req.method, hit.allow);
  await hit.handler({ options, metrics, req, res });
}

interface ProbeContext {
  readonly options: AdminServerOptions;
  readonly metrics: PrometheusMetrics;
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
}

/** The unauthenticated probes, beside `/api` and `/ui` (admin-router.ts matches them). */
const PROBES = new AdminRouter<(ctx: ProbeContext) => Promise<void>>([
  {
    method: 'GET',
    path: '/healthz',
    handler: async ({ req, res }) => sendJson(req, res, 200, { status: 'ok' }),
  },
  { method: 'GET', path: '/readyz', handler: readyz },
  { method: 'GET', path: '/metrics', handler: scrape },
]);

async function scrape({ metrics, req, res }: ProbeContext): Promise<void> {
  // Open like /healthz, on purpose: Prometheus scrapers usually carry no bearer token, and the
  // admin token unlocks approvals, so it should not sit in every scrape config. Nothing here is
  // secret: counts and timings labelled by verdict, tool id, outcome and operation state, never a
  // key value, a run id, a credential or request content. Keep --admin on loopback or a private
  // interface, as for the rest of the admin server.
  const { contentType, text } = await metrics.scrape();
  const body = Buffer.from(text, 'utf8');
  res.writeHead(200, {
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'content-type': contentType,
    'content-length': String(body.byteLength),
  });
  res.end(req.method === 'HEAD' ? undefined : body);
}

async function readyz({ options, req, res }: ProbeContext): Promise<void> {
  const { store } = options;
  try {
    await store.ping();
    sendJson(req, res, 200, { status: 'ready', store: store.kind });
  } catch {
    sendJson(req, res, 503, { status: 'store unreachable', store: store.kind });
  }
}

/**
 * The origin-form target split into raw path segments (no dot-segment resolution, so an id
 * holding `%2F` stays one segment) and its query.
 */
function splitTarget(target: string): { raw: string[]; query: URLSearchParams } {
  if (!target.startsWith('/')) throw badRequest('The request target must be a path (origin form).');
  const q = target.indexOf('?');
  const path = q === -1 ? target : target.slice(0, q);
  return { raw: path.slice(1).split('/'), query: new URLSearchParams(q === -1 ? '' : target.slice(q + 1)) };
}

function decodeSegment(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw badRequest('The path holds malformed percent-encoding.');
  }
}

/** Throws 401 unless the request carries the configured bearer token. Nothing about it is echoed. */
function authenticate(req: IncomingMessage, token: string | null): void {
  const result = checkAdminAuth(req.headers.authorization, token);
  if (result === 'ok') return;
  const detail =
    result === 'unconfigured'
      ? `The admin API is disabled: no admin token is configured. Set ${ADMIN_TOKEN_ENV} or --admin-token-file and restart the gate.`
      : result === 'missing'
        ? 'The admin API needs "Authorization: Bearer <admin token>".'
        : 'The bearer token is not the admin token.';
  throw new HttpProblem({
    status: 401,
    problem: 'unauthorized',
    title: 'Unauthorized',
    detail,
    headers: { 'www-authenticate': result === 'wrong' ? `${REALM}, error="invalid_token"` : REALM },
  });
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
