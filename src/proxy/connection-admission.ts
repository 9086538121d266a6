/**
 * The connection caps (`maxConnections`, `maxConnectionsPerClient`): every new client connection
 * is admitted or refused before node:http reads a byte of it. A refused connection is answered
 * `503` problem+json with `Retry-After` and closed, so a client over its cap fails fast instead of
 * hanging, and the descriptors it holds stay bounded.
 *
 * At a cap, an idle connection is closed first, oldest first, to make room: one that has not sent
 * a complete request head yet, one kept alive between requests, a tunnel that has said nothing.
 * Otherwise connections that trickle a partial head (each allowed `headersTimeoutMs`) would hold
 * the cap and starve the client's real requests; this way a client that completes a request is
 * served. A connection with a request, CONNECT or upgrade in progress, or a relayed tunnel, is
 * never closed for room. `busy` and `idle` say which is which.
 *
 * "Client" is the remote address: the one identity a connection has before any request is read
 * (credentials come with requests). Many agents behind one NAT address share one cap.
 */
import type { Socket } from 'node:net';
import type { GateLogger, GateResponse } from '../engine/index.js';
import { problemResponse } from '../engine/index.js';
import type { ProxyCounters } from './proxy-counters.js';
import type { ProxyLimits } from './proxy-limits.js';
import { writeRawResponse } from './write-raw-response.js';

/** Refusals are logged at most this often per cap: a client hammering its cap must not flood logs. */
const LOG_EVERY_MS = 10_000;

/** What the proxy tells the caps about a connection's use (a tunnel's inner socket: its carrier). */
export interface ConnectionActivity {
  /**
   * A request, CONNECT or upgrade began on `connection`: it is not closed for room until `idle`.
   * False when the connection is no longer admitted (closed for room): the caller drops it.
   */
  busy(connection: object): boolean;
  /** What `busy` began has ended: the connection may be closed for room, the newest idle one. */
  idle(connection: object): void;
}

interface Held {
  readonly socket: Socket;
  readonly client: string;
  /** Requests begun and not ended (pipelined ones count each). */
  inFlight: number;
  /** Requests begun so far: with none, the connection is still sending its first head. */
  begun: number;
}

type Cap = 'global' | 'perClient';
/** What is logged: a refusal at either cap, or an idle connection closed for room. */
type LogKind = Cap | 'closedIdle';

export class ConnectionAdmission implements ConnectionActivity {
  readonly #max: number;
  readonly #maxPerClient: number;
  readonly #counters: ProxyCounters;
  readonly #logger: GateLogger | undefined;
  readonly #held = new Map<object, Held>();
  /** Per client: how many it holds, and its idle ones, oldest idle first (insertion order). */
  readonly #perClient = new Map<string, { held: number; readonly idle: Set<Held> }>();
  /** Every idle connection, oldest idle first. */
  readonly #idle = new Set<Held>();
  readonly #lastLogged = { global: 0, perClient: 0, closedIdle: 0 };
  readonly #unlogged = { global: 0, perClient: 0, closedIdle: 0 };

  constructor(
    limits: Pick<ProxyLimits, 'maxConnections' | 'maxConnectionsPerClient'>,
    counters: ProxyCounters,
    logger?: GateLogger,
  ) {
    this.#max = limits.maxConnections;
    this.#maxPerClient = limits.maxConnectionsPerClient;
    this.#counters = counters;
    this.#logger = logger;
  }

  /** Connections held now (admitted and not yet closed). */
  get open(): number {
    return this.#held.size;
  }

  /**
   * Admits `socket` (counted until it closes) and returns true, making room by closing an idle
   * connection when at a cap; or answers it 503, closes it and returns false.
   */
  admit(socket: Socket): boolean {
    const client = clientOf(socket);
    if (client === null) {
      // Already gone (reset before it was handed over): nothing to serve nor to count.
      socket.destroy();
      return false;
    }
    // The client's own cap first: room made there is room in the total too.
    const mine = this.#perClient.get(client);
    if (
      mine !== undefined &&
      mine.held >= this.#maxPerClient &&
      !this.#closeOldestIdle(mine.idle, 'perClient')
    ) {
      const detail = `This client (${client}) holds its maximum of ${this.#maxPerClient} connections to the gate, each with a request in progress; close idle ones or reuse them.`;
      this.#refuse(socket, 'perClient', client, detail);
      return false;
    }
    if (this.#held.size >= this.#max && !this.#closeOldestIdle(this.#idle, 'global')) {
      this.#refuse(socket, 'global', client, `The gate holds its maximum of ${this.#max} connections.`);
      return false;
    }
    const held: Held = { socket, client, inFlight: 0, begun: 0 };
    this.#held.set(socket, held);
    const record = this.#perClient.get(client) ?? { held: 0, idle: new Set<Held>() };
    record.held += 1;
    this.#perClient.set(client, record);
    this.#markIdle(held);
    socket.once('close', () => {
      if (this.#held.get(socket) === held) this.#forget(held);
    });
    return true;
  }

  busy(connection: object): boolean {
    const held = this.#held.get(connection);
    if (held === undefined) return false;
    held.inFlight += 1;
    held.begun += 1;
    this.#idle.delete(held);
    this.#perClient.get(held.client)?.idle.delete(held);
    return true;
  }

  idle(connection: object): void {
    const held = this.#held.get(connection);
    if (held === undefined || held.inFlight === 0) return;
    held.inFlight -= 1;
    if (held.inFlight === 0) this.#markIdle(held);
  }

  #markIdle(held: Held): void {
    this.#idle.add(held);
    this.#perClient.get(held.client)?.idle.add(held);
  }

  #forget(held: Held): void {
    this.#held.delete(held.socket);
    this.#idle.delete(held);
    const record = this.#perClient.get(held.client);
    if (record === undefined) return;
    record.idle.delete(held);
    record.held -= 1;
    if (record.held === 0) this.#perClient.delete(held.client);
  }

  /**
   * Closes the oldest of `idle` and returns true, or returns false when there is none. Forgotten
   * at once (its `close` comes later), so the room is there for the connection being admitted.
   */
  #closeOldestIdle(idle: ReadonlySet<Held>, cap: Cap): boolean {
    const oldest = idle.values().next();
    if (oldest.done === true) return false;
    const held = oldest.value;
    this.#forget(held);
    this.#counters.increment('connectionsClosedIdle');
    this.#log('closedIdle', held.client, cap);
    if (held.begun === 0) {
      // Still sending its first head: nothing was read nor sent, and it is told so. Whatever it
      // sends later finds it no longer admitted (`busy` is false) and is dropped.
      const detail = `This connection had not sent a complete request when its client (${held.client}) or the gate reached its connection cap; it was closed to make room.`;
      writeRawResponse(held.socket, tooManyConnections(detail));
    } else {
      // Between requests, or a tunnel after its 200: a close is all HTTP allows here.
      held.socket.destroy();
    }
    return true;
  }

  #refuse(socket: Socket, cap: Cap, client: string, detail: string): void {
    this.#counters.increment(cap === 'global' ? 'connectionsRefusedGlobal' : 'connectionsRefusedPerClient');
    socket.on('error', () => socket.destroy());
    writeRawResponse(socket, tooManyConnections(detail));
    this.#log(cap, client, cap);
  }

  /** Logs what the caps did, at most every `LOG_EVERY_MS` per kind, with how many since. */
  #log(kind: LogKind, client: string, cap: Cap): void {
    this.#unlogged[kind] += 1;
    const now = Date.now();
    if (this.#logger === undefined || now - this.#lastLogged[kind] < LOG_EVERY_MS) return;
    const message =
      kind === 'closedIdle'
        ? 'idle connection closed to make room: a connection cap was reached'
        : kind === 'global'
          ? 'connection refused: the gate is at its connection cap'
          : 'connection refused: the client is at its connection cap';
    this.#logger.warn(
      {
        cap,
        client,
        [kind === 'closedIdle' ? 'closed' : 'refused']: this.#unlogged[kind],
        open: this.#held.size,
      },
      message,
    );
    this.#lastLogged[kind] = now;
    this.#unlogged[kind] = 0;
  }
}

function tooManyConnections(detail: string): GateResponse {
  return problemResponse({
    status: 503,
    problem: 'too_many_connections',
    title: 'Too many connections',
    detail: `${detail} Nothing was sent.`,
    headers: { 'retry-after': '1' },
  });
}

/** The remote address, an IPv4-mapped IPv6 address counted as the IPv4 one. */
function clientOf(socket: Socket): string | null {
  const address = socket.remoteAddress;
  if (address === undefined) return null;
  return address.startsWith('::ffff:') ? address.slice('::ffff:'.length) : address;
}
