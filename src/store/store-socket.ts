import { chmodSync, existsSync, unlinkSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { EffectgateError, ERROR_CODES, type ErrorCode, StoreError } from '../errors.js';
import { type SocketPath, socketPath } from './socket-path.js';
import type { Store } from './types.js';

/*
 * The embedded store is single-process (a directory lock guards it), yet docs/design.md §4.4 wants
 * inspection and approval commands to work while a gate runs on it. So the gate that holds the
 * lock serves its open store on a Unix socket inside the store directory, and a command that
 * finds the directory locked talks to that socket instead of failing with "database locked".
 *
 * Access control is the file system: the socket is created 0600 by the gate's user, in the
 * store's own directory, however long its path (socket-path.ts); whoever may read the database
 * files may use it, nobody else. Only the
 * methods below are served: reads, approvals, observations and recovery; never the hot path (`decide`,
 * `recordOutcome`), so a command can only do what the operator commands could do anyway; nor
 * retention's removal (`pruneChain` alone would remove events no archive holds): `audit prune` on
 * an embedded store runs while no gate holds it.
 */

/** File name of the socket inside a `pglite:DIR` store directory. */
export const STORE_SOCKET = 'gate.sock';

const SERVED = [
  'getOperation',
  'listOperations',
  'countOperations',
  'countDuplicates',
  'countShadowVerdicts',
  'listObservations',
  'listApprovals',
  'getApproval',
  'decideApproval',
  'addObservation',
  'findOperations',
  'createGrant',
  'listGrants',
  'revokeGrant',
  'listRuns',
  'releaseRun',
  'recover',
  'getDecision',
  'listDecisions',
  'readEvents',
  'chainHeads',
  'auditLogId',
  'readEventRanges',
  'readBatch',
  'hasUnsealedLegacy',
  'hasUnchainedEvents',
  'latestCheckpoint',
  'getCheckpoint',
  'readCheckpoints',
  'unsealedEvents',
  'ping',
] as const satisfies readonly (keyof Store)[];

type ServedMethod = (typeof SERVED)[number];

const MAX_RPC_BYTES = 1024 * 1024;

export interface StoreSocketServer {
  readonly path: string;
  close(): Promise<void>;
}

/**
 * Serves `store` on `<dir>/gate.sock` (mode 0600), whatever the length of `dir` (socket-path.ts).
 * The caller holds the directory lock, so a socket file already there is a dead gate's leftover
 * and is replaced. A socket that cannot be served is closed before the refusal: a server left
 * listening would keep the process alive after its gate stopped.
 */
export async function serveStoreSocket(
  store: Store,
  dir: string,
  options: { readonly instanceId: string },
): Promise<StoreSocketServer> {
  const where = socketPath(dir, STORE_SOCKET);
  const { path } = where;
  const server = createServer((req, res) => {
    handle(store, options.instanceId, req, res).catch(() => {
      if (!res.headersSent) reply(res, 500, { error: { code: null, message: 'store socket failure' } });
      else res.destroy();
    });
  });
  const close = (): Promise<void> =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }).finally(() => where.release());
  try {
    if (existsSync(path)) unlinkSync(path);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(where.address, () => {
        server.off('error', reject);
        resolve();
      });
    });
    chmodSync(path, 0o600);
  } catch (err) {
    if (server.listening) await close();
    else where.release();
    throw err;
  }
  return { path, close };
}

async function handle(
  store: Store,
  instanceId: string,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  if (req.method !== 'POST' || req.url !== '/rpc')
    return reply(res, 404, { error: { code: null, message: 'not found' } });
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.byteLength;
    if (size > MAX_RPC_BYTES) return reply(res, 413, { error: { code: null, message: 'request too large' } });
    chunks.push(chunk);
  }
  let call: { method?: unknown; args?: unknown };
  try {
    call = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof call;
  } catch {
    return reply(res, 400, { error: { code: null, message: 'body is not JSON' } });
  }
  const method = call.method;
  if (
    typeof method !== 'string' ||
    !(SERVED as readonly string[]).includes(method) ||
    !Array.isArray(call.args)
  ) {
    return reply(res, 400, {
      error: { code: null, message: `not a served store method: ${String(method)}` },
    });
  }
  let args = call.args as unknown[];
  if (method === 'recover') {
    // The serving gate is alive: a recovery asked through it may never treat the store as
    // exclusively its caller's, nor touch the serving gate's own in-flight attempts.
    args = [{ ...(args[0] as object), instanceId, exclusive: false }];
  }
  try {
    const fn = store[method as ServedMethod] as (...args: unknown[]) => Promise<unknown>;
    const result = await fn.apply(store, args);
    reply(res, 200, { result: result ?? null });
  } catch (err) {
    const code = err instanceof EffectgateError ? err.code : null;
    reply(res, 200, { error: { code, message: err instanceof Error ? err.message : String(err) } });
  }
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** True when a gate serves the store directory `dir`. */
export function hasStoreSocket(dir: string): boolean {
  return existsSync(join(dir, STORE_SOCKET));
}

/**
 * A `Store` that forwards the served methods to the gate running on `dir`; the hot path and
 * maintenance methods refuse. Errors come back with their stable code.
 */
export function connectStoreSocket(dir: string): Store {
  const path = join(dir, STORE_SOCKET);
  const call = (method: ServedMethod, args: unknown[]): Promise<unknown> =>
    new Promise((resolve, reject) => {
      const body = JSON.stringify({ method, args });
      let where: SocketPath;
      try {
        where = socketPath(dir, STORE_SOCKET);
      } catch (err) {
        reject(err);
        return;
      }
      const req = httpRequest(
        {
          socketPath: where.address,
          method: 'POST',
          path: '/rpc',
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            try {
              const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
                result?: unknown;
                error?: { code: string | null; message: string };
              };
              if (parsed.error !== undefined) {
                const { code, message } = parsed.error;
                reject(
                  code !== null && code in ERROR_CODES
                    ? new EffectgateError(code as ErrorCode, message)
                    : new StoreError(`store socket: ${message}`),
                );
              } else {
                resolve(parsed.result);
              }
            } catch (err) {
              reject(new StoreError('store socket: unreadable answer', { cause: err }));
            }
          });
          res.on('error', (err) => reject(new StoreError('store socket: answer lost', { cause: err })));
        },
      );
      // A short name of a long path holds a directory handle only until the connection is made. A
      // connection the agent kept alive is made already: it never says 'connect' again, and a
      // listener per call would pile up on it.
      req.on('socket', (socket) => {
        if (socket.connecting) socket.once('connect', () => where.release());
        else where.release();
      });
      req.on('close', () => where.release());
      req.on('error', (err) =>
        reject(
          new StoreError(`the gate serving ${dir} did not answer on ${path}: ${err.message}`, { cause: err }),
        ),
      );
      req.end(body);
    });
  const remote: Record<string, unknown> = {
    kind: 'pglite',
    // The gate's key files are not for its socket's callers: none of the served calls needs them.
    dir: null,
    stats: { roundTrips: 0, backgroundRoundTrips: 0 },
    close: async () => undefined,
  };
  for (const method of SERVED) remote[method] = (...args: unknown[]) => call(method, args);
  for (const method of [
    'decide',
    'recordOutcome',
    'migrate',
    'registerInstance',
    'heartbeat',
    'stopInstance',
  ]) {
    remote[method] = async () => {
      throw new EffectgateError(
        'EG_ERR_STORE_LOCKED',
        `${method} is not available through the running gate's store socket (${path}); stop the gate first.`,
      );
    };
  }
  return remote as unknown as Store;
}
