/**
 * The connection caps (`maxConnections`, `maxConnectionsPerClient`): every new client connection
 * is admitted or refused before node:http reads a byte of it. A refused connection is answered
 * `503` problem+json with `Retry-After` and closed, so a client over its cap fails fast instead of
 * hanging, and the descriptors it holds stay bounded.
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

export class ConnectionAdmission {
  readonly #max: number;
  readonly #maxPerClient: number;
  readonly #counters: ProxyCounters;
  readonly #logger: GateLogger | undefined;
  readonly #perClient = new Map<string, number>();
  #open = 0;
  readonly #lastLogged = { global: 0, perClient: 0 };
  readonly #unlogged = { global: 0, perClient: 0 };

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
    return this.#open;
  }

  /**
   * Admits `socket` (counted until it closes) and returns true, or answers it 503, closes it and
   * returns false.
   */
  admit(socket: Socket): boolean {
    const client = clientOf(socket);
    if (client === null) {
      // Already gone (reset before it was handed over): nothing to serve nor to count.
      socket.destroy();
      return false;
    }
    const held = this.#perClient.get(client) ?? 0;
    if (this.#open >= this.#max) {
      this.#refuse(socket, 'global', client, `The gate holds its maximum of ${this.#max} connections.`);
      return false;
    }
    if (held >= this.#maxPerClient) {
      const detail = `This client (${client}) holds its maximum of ${this.#maxPerClient} connections to the gate; close idle ones or reuse them.`;
      this.#refuse(socket, 'perClient', client, detail);
      return false;
    }
    this.#open += 1;
    this.#perClient.set(client, held + 1);
    socket.once('close', () => {
      this.#open -= 1;
      const left = (this.#perClient.get(client) ?? 1) - 1;
      if (left === 0) this.#perClient.delete(client);
      else this.#perClient.set(client, left);
    });
    return true;
  }

  #refuse(socket: Socket, cap: 'global' | 'perClient', client: string, detail: string): void {
    this.#counters.increment(cap === 'global' ? 'connectionsRefusedGlobal' : 'connectionsRefusedPerClient');
    socket.on('error', () => socket.destroy());
    writeRawResponse(socket, tooManyConnections(detail));
    this.#unlogged[cap] += 1;
    const now = Date.now();
    if (this.#logger !== undefined && now - this.#lastLogged[cap] >= LOG_EVERY_MS) {
      this.#logger.warn(
        { cap, client, refused: this.#unlogged[cap], open: this.#open },
        cap === 'global'
          ? 'connection refused: the gate is at its connection cap'
          : 'connection refused: the client is at its connection cap',
      );
      this.#lastLogged[cap] = now;
      this.#unlogged[cap] = 0;
    }
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
