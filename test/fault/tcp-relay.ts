/**
 * A loopback TCP relay between a gate and PostgreSQL that a fault test owns and cuts at chosen
 * moments. The database server itself is never touched: an outage is this relay refusing or
 * destroying connections, so every other test keeps its PostgreSQL.
 *
 *   const relay = await startTcpRelay();             // in front of 127.0.0.1:5432
 *   createGate({ store: relay.url(testStore.url), … })
 *   relay.down(); …; relay.up();                      // an outage
 *   await relay.flap(100, 3_000);                     // down/up every 100 ms for 3 s
 *   await relay.trigger({ pattern: STATEMENT.recordOutcome, when: 'before-forward', action: 'down' });
 *
 * Bounded: at most `maxConnections` accepted in its life, and it closes itself after `lifetimeMs`
 * (a forgotten relay never keeps a test process alive).
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export interface TcpRelayOptions {
  readonly targetHost?: string;
  readonly targetPort?: number;
  /** Connections accepted over the relay's life before it refuses every new one. Default 20 000. */
  readonly maxConnections?: number;
  /** The relay closes itself after this long. Default 10 minutes. */
  readonly lifetimeMs?: number;
}

/**
 * A one-shot trap on the client → server byte stream. `pattern` is looked for in each chunk the
 * gate sends. The pg driver sends the hot-path statements as named prepared statements, and the
 * name, NUL-terminated, is in both the Parse (first use on a connection) and every Bind, so
 * `STATEMENT.recordOutcome` finds exactly that statement and nothing that merely mentions it:
 * - `before-forward`: the chunk is dropped: the statement never reaches the server (not written);
 * - `after-reply`: the chunk is forwarded and the server's reply on that connection is dropped: the
 *   statement ran (and committed) but the gate never learns it.
 * Then (`action`) every current connection is cut (`cut`), or the relay also stays down until
 * `up()` (`down`).
 */
export interface RelayTrigger {
  readonly pattern: string;
  readonly when: 'before-forward' | 'after-reply';
  readonly action: 'cut' | 'down';
}

/**
 * Trap patterns for the gate's two hot-path statements (src/store/hot-call.ts names them). A
 * group-commit batch is `batch:eg_decide` or `batch:eg_record_outcome`, so `decide` and
 * `recordOutcome` find a lone call and a batch alike; `decideBatch` and `recordOutcomeBatch` only
 * a batch.
 */
export const STATEMENT = {
  decide: 'eg_decide\u0000',
  recordOutcome: 'eg_record_outcome\u0000',
  decideBatch: 'batch:eg_decide\u0000',
  recordOutcomeBatch: 'batch:eg_record_outcome\u0000',
  mixedBatch: 'batch:mixed\u0000',
} as const;

/**
 * The server's replies held in the relay (`stallReplies(pattern)`): on a connection that sent a
 * statement containing the pattern, the statement still reaches the server and runs, and no reply
 * reaches the client until `release()`, so the client's round trips stay in flight with no lock
 * held in the database (and no lock_timeout to outlast). Other connections, and the start-up of
 * new ones, flow as usual.
 */
export interface ReplyStall {
  /** Statements containing the pattern forwarded to the server since the stall began. */
  sent(): number;
  /** Sends every held reply, in order, and forwards the next ones at once. */
  release(): void;
}

export interface RelayStats {
  /** Client connections accepted since start. */
  readonly accepted: number;
  /** Client connections destroyed on arrival because the relay was down (or past its budget). */
  readonly refused: number;
  /** Live connections destroyed by `cut()`, `down()` or a trigger. */
  readonly cut: number;
  /** Connections currently relayed. */
  readonly active: number;
  /** Times the relay went down. */
  readonly outages: number;
}

export interface TcpRelay {
  readonly port: number;
  /** `dbUrl` with its host and port replaced by the relay's: the same database, through the relay. */
  url(dbUrl: string): string;
  /** Destroys every current connection; new ones are relayed as usual. Returns how many were cut. */
  cut(): number;
  /** Cuts every current connection and destroys every new one until `up()`. */
  down(): void;
  up(): void;
  /** Accepts connections but forwards nothing (a partition that drops packets) until `up()`. */
  blackhole(): void;
  readonly isDown: boolean;
  /**
   * Alternates down and up every `periodMs` (down first) for `forMs`, then stays up. Resolves
   * when the flapping is over; `up()` or `close()` stops it early.
   */
  flap(periodMs: number, forMs: number): Promise<void>;
  /** Arms a one-shot trap (see `RelayTrigger`); resolves when it fired, rejects after `timeoutMs`. */
  trigger(trap: RelayTrigger, timeoutMs?: number): Promise<void>;
  /** Holds replies to statements containing `pattern` until the stall's `release()` (one at a time). */
  stallReplies(pattern: string): ReplyStall;
  stats(): RelayStats;
  close(): Promise<void>;
}

type Mode = 'up' | 'down' | 'blackhole';

interface Pair {
  readonly client: Socket;
  readonly server: Socket | null;
}

interface ArmedTrap extends RelayTrigger {
  fire(): void;
}

export async function startTcpRelay(options: TcpRelayOptions = {}): Promise<TcpRelay> {
  const targetHost = options.targetHost ?? '127.0.0.1';
  const targetPort = options.targetPort ?? 5432;
  const maxConnections = options.maxConnections ?? 20_000;
  const pairs = new Set<Pair>();
  let mode: Mode = 'up';
  let accepted = 0;
  let refused = 0;
  let cutCount = 0;
  let outages = 0;
  let closed = false;
  let trap: ArmedTrap | null = null;
  let stall: { readonly pattern: string; sent: number; readonly held: (() => void)[] } | null = null;
  let flapTimer: NodeJS.Timeout | null = null;
  let flapDone: (() => void) | null = null;

  const destroyPair = (pair: Pair): void => {
    pairs.delete(pair);
    pair.client.destroy();
    pair.server?.destroy();
  };
  const cutAll = (): number => {
    const n = pairs.size;
    for (const pair of [...pairs]) destroyPair(pair);
    cutCount += n;
    return n;
  };
  const goDown = (): void => {
    if (mode !== 'down') outages += 1;
    mode = 'down';
    cutAll();
  };
  const fire = (armed: ArmedTrap): void => {
    trap = null;
    if (armed.action === 'down') goDown();
    else cutAll();
    armed.fire();
  };

  const server: Server = createServer((client) => {
    accepted += 1;
    client.on('error', () => undefined);
    if (mode === 'down' || closed || accepted > maxConnections) {
      refused += 1;
      client.destroy();
      return;
    }
    if (mode === 'blackhole') {
      // Accepted and never answered: the client waits on its own timeouts.
      const pair: Pair = { client, server: null };
      pairs.add(pair);
      client.on('close', () => pairs.delete(pair));
      return;
    }
    const upstream = connect(targetPort, targetHost);
    const pair: Pair = { client, server: upstream };
    pairs.add(pair);
    upstream.on('error', () => undefined);
    // Set when an `after-reply` trap let its statement through on this connection: the next reply
    // from the server is dropped and the connection cut.
    let swallowReply: ArmedTrap | null = null;
    // Set when this connection sent a statement the current stall holds the replies of.
    let stalledBy: typeof stall = null;
    client.on('data', (chunk: Buffer) => {
      if (mode === 'blackhole') return;
      const armed = trap;
      if (armed !== null && chunk.includes(armed.pattern)) {
        if (armed.when === 'before-forward') {
          fire(armed);
          return;
        }
        trap = null;
        swallowReply = armed;
      }
      if (stall !== null && chunk.includes(stall.pattern)) {
        stall.sent += 1;
        stalledBy = stall;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (mode === 'blackhole') return;
      const swallowed = swallowReply;
      if (swallowed !== null) {
        swallowReply = null;
        if (swallowed.action === 'down') goDown();
        else cutAll();
        swallowed.fire();
        return;
      }
      if (stalledBy !== null && stalledBy === stall) {
        stall.held.push(() => {
          if (!client.destroyed) client.write(chunk);
        });
        return;
      }
      client.write(chunk);
    });
    const end = (): void => destroyPair(pair);
    client.on('close', end);
    upstream.on('close', end);
  });
  server.on('error', () => undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('tcp relay: no port');
  const port = address.port;

  const stopFlap = (): void => {
    if (flapTimer !== null) clearInterval(flapTimer);
    flapTimer = null;
    const done = flapDone;
    flapDone = null;
    done?.();
  };
  const lifetime = setTimeout(() => void relay.close(), options.lifetimeMs ?? 600_000);
  lifetime.unref();

  const relay: TcpRelay = {
    port,
    url(dbUrl) {
      const u = new URL(dbUrl);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    cut() {
      return cutAll();
    },
    down() {
      goDown();
    },
    up() {
      stopFlap();
      mode = 'up';
    },
    blackhole() {
      mode = 'blackhole';
    },
    get isDown() {
      return mode !== 'up';
    },
    flap(periodMs, forMs) {
      stopFlap();
      return new Promise<void>((resolve) => {
        const until = Date.now() + forMs;
        flapDone = resolve;
        goDown();
        flapTimer = setInterval(() => {
          if (Date.now() >= until || closed) {
            mode = 'up';
            stopFlap();
          } else if (mode === 'down') {
            mode = 'up';
          } else {
            goDown();
          }
        }, periodMs);
      });
    },
    trigger(t, timeoutMs = 15_000) {
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          trap = null;
          reject(
            new Error(`tcp relay: no statement containing ${JSON.stringify(t.pattern)} in ${timeoutMs} ms`),
          );
        }, timeoutMs);
        trap = {
          ...t,
          fire: () => {
            clearTimeout(timer);
            resolve();
          },
        };
      });
    },
    stallReplies(pattern) {
      if (stall !== null) throw new Error('tcp relay: replies are stalled already');
      const mine = { pattern, sent: 0, held: [] as (() => void)[] };
      stall = mine;
      return {
        sent: () => mine.sent,
        release: () => {
          if (stall === mine) stall = null;
          for (const write of mine.held.splice(0)) write();
        },
      };
    },
    stats() {
      return { accepted, refused, cut: cutCount, active: pairs.size, outages };
    },
    async close() {
      if (closed) return;
      closed = true;
      clearTimeout(lifetime);
      stopFlap();
      trap = null;
      for (const pair of [...pairs]) destroyPair(pair);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return relay;
}
