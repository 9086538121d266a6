import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

/*
 * The embedded PGlite runs in a worker thread, not in the gate's event loop. A governed allow
 * costs PGlite about 0.65 ms of WASM CPU (decide + recordOutcome); in-process, that time blocked
 * every HTTP request the proxy was serving, so PGlite's CPU and the proxy's added up (about 750
 * allows/s at 32 connections on 2 cores). In a worker they overlap (about 1,200), and each query
 * costs the proxy's event loop only two messages (0.05-0.1 ms more latency per store call).
 *
 * The worker is a short JavaScript string (no TypeScript, no file of its own), so it starts the
 * same from src/ under a test runner, from dist/, and from a bundled CLI. It receives PGlite's
 * resolved location: a worker evaluated from a string cannot resolve packages itself.
 */

/** A result as the store uses it: rows as objects (PGlite's parsers applied), and the count. */
export interface EmbeddedResult<R> {
  readonly rows: R[];
  readonly affectedRows?: number;
}

/**
 * What the kysely dialect needs from an embedded database. `query` and `exec` hand their statement
 * over before they return (before any await), and statements run in the order they were handed
 * over: PGliteLink.pipelined relies on both.
 */
export interface EmbeddedPg {
  readonly closed: boolean;
  /** Extended protocol, with parameters. */
  query<R>(sql: string, params: readonly unknown[]): Promise<EmbeddedResult<R>>;
  /** Simple protocol (no parameters): the last statement's result. */
  exec<R>(sql: string): Promise<EmbeddedResult<R>>;
  close(): Promise<void>;
}

const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const fields = ['code', 'detail', 'hint', 'severity', 'position', 'where', 'schema', 'table', 'column',
  'constraint', 'routine'];
const plain = (e) => {
  const out = { name: e?.name ?? 'Error', message: e?.message ?? String(e) };
  for (const f of fields) if (e?.[f] !== undefined) out[f] = String(e[f]);
  return out;
};
(async () => {
  let db;
  try {
    const { PGlite, types } = await import(workerData.pglite);
    db = await PGlite.create(workerData.dataDir);
    // PGlite copies its whole parser table ({ ...parsers }) to parse every result, and at startup
    // adds one parser per array type (about 290): that copy alone cost about 60 us per query. The
    // store's tables have no array columns: keep the scalar parsers.
    db.parsers = { ...types.parsers };
    // PGlite starts with client_min_messages = debug3 and log_min_messages = debug1: every
    // statement formats debug messages nobody reads.
    await db.exec("set client_min_messages = warning; set log_min_messages = warning");
  } catch (e) {
    parentPort.postMessage({ id: 0, error: plain(e) });
    return;
  }
  parentPort.postMessage({ id: 0 });
  // Strictly one message after another, in arrival order: the main thread relies on it to queue
  // statements before the previous ones have returned (PGliteLink.pipelined).
  let queue = Promise.resolve();
  parentPort.on('message', (message) => {
    queue = queue.then(() => run(message));
  });
  async function run({ id, sql, params, close }) {
    try {
      if (close) {
        await db.close();
        parentPort.postMessage({ id });
        parentPort.close();
        return;
      }
      const r = params
        ? await db.query(sql, params, { rowMode: 'object' })
        : (await db.exec(sql, { rowMode: 'object' })).at(-1) ?? { rows: [] };
      parentPort.postMessage({ id, rows: r.rows, affectedRows: r.affectedRows });
    } catch (e) {
      parentPort.postMessage({ id, error: plain(e) });
    }
  }
})();
`;

interface Reply {
  readonly id: number;
  readonly rows?: unknown[];
  readonly affectedRows?: number;
  readonly error?: { readonly name: string; readonly message: string } & Record<string, string>;
}

interface Pending {
  resolve(reply: Reply): void;
  reject(err: Error): void;
}

/** Starts PGlite in a worker thread (`dataDir` undefined = in memory) and waits until it is ready. */
export async function startPGliteWorker(dataDir: string | undefined): Promise<EmbeddedPg> {
  const pglite = pathToFileURL(createRequire(import.meta.url).resolve('@electric-sql/pglite')).href;
  const db = new WorkerPg(new Worker(WORKER_SOURCE, { eval: true, workerData: { pglite, dataDir } }));
  try {
    await db.ready;
  } catch (err) {
    await db.close().catch(() => undefined);
    throw err;
  }
  return db;
}

class WorkerPg implements EmbeddedPg {
  readonly ready: Promise<void>;
  readonly #worker: Worker;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #closed = false;

  constructor(worker: Worker) {
    this.#worker = worker;
    this.ready = new Promise<void>((resolve, reject) => {
      this.#pending.set(0, { resolve: () => resolve(), reject });
    });
    worker.on('message', (reply: Reply) => this.#settle(reply));
    worker.on('error', (err) => this.#fail(err));
    worker.on('exit', (code) => this.#fail(new Error(`the embedded store's worker exited (code ${code})`)));
  }

  get closed(): boolean {
    return this.#closed;
  }

  query<R>(sql: string, params: readonly unknown[]): Promise<EmbeddedResult<R>> {
    return this.#request<R>({ sql, params: [...params] });
  }

  exec<R>(sql: string): Promise<EmbeddedResult<R>> {
    return this.#request<R>({ sql });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    try {
      await this.#send({ close: true });
    } catch {
      // Already gone: nothing left to close.
    }
    this.#closed = true;
    await this.#worker.terminate();
  }

  async #request<R>(message: { sql: string; params?: unknown[] }): Promise<EmbeddedResult<R>> {
    if (this.#closed) throw new Error('the embedded store is closed');
    const reply = await this.#send(message);
    const result = { rows: (reply.rows ?? []) as R[] };
    return reply.affectedRows === undefined ? result : { ...result, affectedRows: reply.affectedRows };
  }

  #send(message: object): Promise<Reply> {
    const id = this.#nextId++;
    return new Promise<Reply>((resolve, reject) => {
      if (this.#pending.size === 0) this.#worker.ref();
      this.#pending.set(id, { resolve, reject });
      this.#worker.postMessage({ id, ...message });
    });
  }

  #settle(reply: Reply): void {
    const pending = this.#pending.get(reply.id);
    if (pending === undefined) return;
    this.#pending.delete(reply.id);
    // Idle, the worker must not keep the process alive (an in-process PGlite never did); it is
    // referenced while anything is in flight, starting with its own start-up.
    if (this.#pending.size === 0) this.#worker.unref();
    if (reply.error === undefined) pending.resolve(reply);
    else pending.reject(Object.assign(new Error(reply.error.message), reply.error));
  }

  #fail(err: Error): void {
    this.#closed = true;
    for (const pending of this.#pending.values()) pending.reject(err);
    this.#pending.clear();
  }
}
