/**
 * The destination of the fault suite: a real loopback HTTP server that keeps its OWN ledger of the
 * effects it performed, so a test can compare what really happened with what the gate's trail
 * says (Jepsen style: the destination is the ground truth, never the gate).
 *
 *   POST /<collection>/effects   body { "order": "o-17", "amount": 1 }: performs the effect (a
 *                                ledger entry) and answers 201 { id, order, amount, url }
 *   GET  /<collection>/effects[?order=X]   the collection's effects (a reconciliation lookup)
 *
 * Collections that `honors` accepts behave like an API honouring `Idempotency-Key`: a key seen
 * before replays the stored result (`Idempotent-Replayed: true`), performs nothing and the ledger
 * notes the replay. Other collections perform an effect on every POST.
 *
 * Per order (the semantic key value), `plan()` queues what the next POSTs do: answer after a
 * delay, commit and drop the connection, commit and never answer, or hold the answer until the
 * test releases it (`arrival()` resolves when the request is there, so a test cuts the store
 * exactly while the call is at the destination).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/**
 * - `ok`: perform (or replay) and answer 201 (after `delayMs` when set);
 * - `commit-and-drop`: perform (or replay), then destroy the socket without answering;
 * - `commit-and-hang`: perform, then never answer (until the server closes);
 * - `drop-before-commit`: destroy the socket without performing anything;
 * - `hold`: perform, then answer only when the test calls `release()` on the arrival.
 */
export type Behaviour = 'ok' | 'commit-and-drop' | 'commit-and-hang' | 'drop-before-commit' | 'hold';

export interface Plan {
  readonly behaviour?: Behaviour;
  readonly delayMs?: number;
}

export interface LedgerEntry {
  /** Arrival order at the destination, from 1. */
  readonly seq: number;
  readonly collection: string;
  /** The semantic key value (`$.body.order`). */
  readonly order: string;
  /** The Idempotency-Key header as received (the gate injects the operation id), or `null`. */
  readonly idempotencyKey: string | null;
  /** True when the destination replayed a stored result instead of performing the effect again. */
  readonly replayed: boolean;
  /** The effect's id (the replayed one's for a replay). */
  readonly effectId: string;
  /** The `Effectgate-Run` header if one leaked through (the gate strips it: expected `null`). */
  readonly leakedRunHeader: string | null;
  readonly at: number;
  /** Whether the destination wrote a complete response (false: dropped, hung or cut). */
  answered: boolean;
}

/** One POST as it arrived, whatever it did (ledger entries are only the ones that committed). */
export interface Arrival {
  readonly seq: number;
  readonly collection: string;
  readonly order: string;
  readonly idempotencyKey: string | null;
  readonly behaviour: Behaviour;
  /** For `hold`: answers now. A no-op otherwise. */
  release(): void;
}

export interface PerformedTwice {
  readonly collection: string;
  readonly order: string;
  /** Effects performed (replays excluded). */
  readonly effects: number;
  readonly idempotencyKeys: readonly (string | null)[];
}

export interface LedgerDestination {
  readonly url: string;
  readonly port: number;
  /** Queues plans for the next POSTs of `order` (then the server default). */
  plan(order: string, ...plans: Plan[]): void;
  /** Resolves with the next POST of `order` to arrive (already arrived ones count, oldest first). */
  arrival(order: string, timeoutMs?: number): Promise<Arrival>;
  /** Every effect performed or replayed, in arrival order. */
  ledger(): readonly LedgerEntry[];
  /** Every POST that arrived, committed or not. */
  arrivals(): readonly Arrival[];
  /** GET lookups received (reconciliation). */
  lookups(): number;
  /** Keys (collection, order) with more than one performed effect (replays excluded). */
  performedTwice(): PerformedTwice[];
  close(): Promise<void>;
}

export interface LedgerDestinationOptions {
  /** Which collections honour `Idempotency-Key`. Default none. */
  readonly honors?: (collection: string) => boolean;
  /** Default plan of every POST without a queued one. */
  readonly defaults?: Plan;
  /** POST bodies above this are refused (413): a bound on what a load loop can make it hold. */
  readonly maxBodyBytes?: number;
}

interface Stored {
  readonly body: string;
  readonly effectId: string;
  readonly response: string;
}

const EFFECT_PATH = /^\/([a-z0-9_-]+)\/effects$/;

export async function startLedgerDestination(
  options: LedgerDestinationOptions = {},
): Promise<LedgerDestination> {
  const honors = options.honors ?? ((): boolean => false);
  const defaults: Plan = options.defaults ?? {};
  const maxBody = options.maxBodyBytes ?? 64 * 1024;
  const plans = new Map<string, Plan[]>();
  const entries: LedgerEntry[] = [];
  const arrived: Arrival[] = [];
  const waiters = new Map<string, ((a: Arrival) => void)[]>();
  const taken = new Map<string, number>();
  const byKey = new Map<string, Stored>();
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  let seq = 0;
  let effects = 0;
  let lookups = 0;
  let base = '';

  const send = (
    res: ServerResponse,
    status: number,
    body: string,
    headers: Record<string, string> = {},
  ): void => {
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      ...headers,
    });
    res.end(body);
  };
  const later = (ms: number, fn: () => void): void => {
    const t = setTimeout(() => {
      timers.delete(t);
      fn();
    }, ms);
    timers.add(t);
  };
  const notify = (a: Arrival): void => {
    const list = waiters.get(a.order);
    const next = list?.shift();
    if (next !== undefined) {
      taken.set(a.order, (taken.get(a.order) ?? 0) + 1);
      next(a);
    }
  };

  const onPost = (collection: string, text: string, req: IncomingMessage, res: ServerResponse): void => {
    let order: string;
    let amount: unknown;
    try {
      const body = JSON.parse(text) as { order?: unknown; amount?: unknown };
      if (typeof body.order !== 'string') throw new Error('no order');
      order = body.order;
      amount = body.amount ?? null;
    } catch {
      send(res, 400, JSON.stringify({ message: 'body must be JSON with a string "order"' }));
      return;
    }
    const plan = plans.get(order)?.shift() ?? defaults;
    const behaviour = plan.behaviour ?? 'ok';
    const keyHeader = req.headers['idempotency-key'];
    const idempotencyKey = typeof keyHeader === 'string' ? keyHeader : null;
    seq += 1;
    let release = (): void => undefined;
    const arrival: Arrival = {
      seq,
      collection,
      order,
      idempotencyKey,
      behaviour,
      release: () => release(),
    };
    arrived.push(arrival);
    if (behaviour === 'drop-before-commit') {
      req.socket.destroy();
      notify(arrival);
      return;
    }
    // Commit first, then answer: the effect has happened whatever becomes of the response.
    const honored = idempotencyKey !== null && honors(collection);
    const stored = honored ? byKey.get(`${collection}\n${idempotencyKey}`) : undefined;
    if (stored !== undefined && stored.body !== text) {
      send(res, 422, JSON.stringify({ message: 'Idempotency-Key reused with a different request body' }));
      notify(arrival);
      return;
    }
    let response: string;
    let effectId: string;
    if (stored !== undefined) {
      response = stored.response;
      effectId = stored.effectId;
    } else {
      effects += 1;
      effectId = `eff_${effects}`;
      response = JSON.stringify({
        id: effectId,
        order,
        amount,
        url: `${base}/${collection}/effects/${effectId}`,
      });
      if (honored) byKey.set(`${collection}\n${idempotencyKey}`, { body: text, effectId, response });
    }
    const entry: LedgerEntry = {
      seq,
      collection,
      order,
      idempotencyKey,
      replayed: stored !== undefined,
      effectId,
      leakedRunHeader:
        typeof req.headers['effectgate-run'] === 'string' ? req.headers['effectgate-run'] : null,
      at: Date.now(),
      answered: false,
    };
    entries.push(entry);
    const answer = (): void => {
      if (res.destroyed || res.writableEnded) return;
      res.once('finish', () => {
        entry.answered = true;
      });
      send(
        res,
        201,
        response,
        honors(collection) ? { 'idempotent-replayed': String(stored !== undefined) } : {},
      );
    };
    if (behaviour === 'commit-and-drop') req.socket.destroy();
    else if (behaviour === 'hold') release = answer;
    else if (behaviour === 'ok') {
      if (plan.delayMs !== undefined && plan.delayMs > 0) later(plan.delayMs, answer);
      else answer();
    }
    // commit-and-hang: never answered; the socket closes with the client or the server.
    notify(arrival);
  };

  const onGet = (collection: string, query: URLSearchParams, res: ServerResponse): void => {
    lookups += 1;
    const order = query.get('order');
    const list = entries
      .filter((e) => e.collection === collection && !e.replayed && (order === null || e.order === order))
      .map((e) => ({ id: e.effectId, order: e.order, url: `${base}/${collection}/effects/${e.effectId}` }));
    send(res, 200, JSON.stringify(list));
  };

  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://destination.invalid');
    const m = EFFECT_PATH.exec(url.pathname);
    if (m === null) {
      send(res, 404, JSON.stringify({ message: 'not found' }));
      return;
    }
    const collection = m[1]!;
    if (req.method === 'GET') {
      req.resume();
      onGet(collection, url.searchParams, res);
      return;
    }
    if (req.method !== 'POST') {
      send(res, 405, JSON.stringify({ message: 'method not allowed' }));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= maxBody) chunks.push(c);
    });
    req.on('error', () => undefined);
    req.on('end', () => {
      if (size > maxBody) {
        send(res, 413, JSON.stringify({ message: 'too large' }));
        return;
      }
      onPost(collection, Buffer.concat(chunks).toString('utf8'), req, res);
    });
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  base = `http://127.0.0.1:${port}`;

  return {
    url: base,
    port,
    plan(order, ...more) {
      plans.set(order, [...(plans.get(order) ?? []), ...more]);
    },
    arrival(order, timeoutMs = 10_000) {
      const already = arrived.filter((a) => a.order === order);
      const used = taken.get(order) ?? 0;
      if (already.length > used) {
        taken.set(order, used + 1);
        return Promise.resolve(already[used]!);
      }
      return new Promise<Arrival>((resolve, reject) => {
        const timer = setTimeout(() => {
          const list = waiters.get(order) ?? [];
          waiters.set(
            order,
            list.filter((w) => w !== done),
          );
          reject(new Error(`destination: no POST of order ${order} within ${timeoutMs} ms`));
        }, timeoutMs);
        const done = (a: Arrival): void => {
          clearTimeout(timer);
          resolve(a);
        };
        waiters.set(order, [...(waiters.get(order) ?? []), done]);
      });
    },
    ledger: () => entries,
    arrivals: () => arrived,
    lookups: () => lookups,
    performedTwice() {
      const groups = new Map<string, LedgerEntry[]>();
      for (const e of entries) {
        if (e.replayed) continue;
        const k = `${e.collection}\n${e.order}`;
        groups.set(k, [...(groups.get(k) ?? []), e]);
      }
      return [...groups.values()]
        .filter((g) => g.length > 1)
        .map((g) => ({
          collection: g[0]!.collection,
          order: g[0]!.order,
          effects: g.length,
          idempotencyKeys: g.map((e) => e.idempotencyKey),
        }));
    },
    close() {
      for (const t of timers) clearTimeout(t);
      timers.clear();
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      });
    },
  };
}
