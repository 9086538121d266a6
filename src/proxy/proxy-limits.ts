/**
 * The forward proxy's resource limits, all in one place: how long a client may hold a connection
 * or a tunnel without using it, and how many connections the proxy and any one client may hold.
 * Without them, idle tunnels from one agent could take every file descriptor the gate has and
 * every other agent's requests would fail (issue 10: 92 idle tunnels did).
 */

export interface ProxyLimits {
  /** Time for a client to send a complete request head, also on a new connection. */
  readonly headersTimeoutMs: number;
  /** Time for a client to send a complete request (head and body). */
  readonly requestTimeoutMs: number;
  /** How long an idle keep-alive client connection (or a served tunnel) is kept between requests. */
  readonly keepAliveTimeoutMs: number;
  /**
   * After `200 Connection Established`: time for the first bytes of the tunnel and, for TLS, a
   * complete ClientHello (its SNI is routed before anything is relayed).
   */
  readonly tunnelPeekTimeoutMs: number;
  /** A relayed tunnel (TLS or a non-HTTP protocol) or an upgraded WebSocket with no byte either way. */
  readonly tunnelIdleTimeoutMs: number;
  /**
   * Client connections the proxy holds at once (each may hold an upstream socket too, so keep it
   * under half the process's descriptor limit). Over it new connections get a 503 and are closed.
   */
  readonly maxConnections: number;
  /** Client connections one remote address holds at once, so one client cannot starve others. */
  readonly maxConnectionsPerClient: number;
}

/** The defaults; `createProxyServer({ limits })` overrides any of them. */
export const DEFAULT_PROXY_LIMITS: ProxyLimits = Object.freeze({
  headersTimeoutMs: 30_000,
  requestTimeoutMs: 300_000,
  keepAliveTimeoutMs: 5_000,
  tunnelPeekTimeoutMs: 10_000,
  tunnelIdleTimeoutMs: 120_000,
  maxConnections: 1024,
  maxConnectionsPerClient: 256,
});

/** The defaults with `overrides` applied, checked (a limit of 0 or less would refuse everything). */
export function resolveLimits(overrides: Partial<ProxyLimits> = {}): ProxyLimits {
  const limits: ProxyLimits = { ...DEFAULT_PROXY_LIMITS, ...withoutUndefined(overrides) };
  for (const [name, value] of Object.entries(limits)) {
    if (!Number.isInteger(value) || value <= 0) {
      throw new RangeError(`Proxy limit ${name} must be a positive integer, not ${String(value)}.`);
    }
  }
  return Object.freeze(limits);
}

function withoutUndefined(values: Partial<ProxyLimits>): Partial<ProxyLimits> {
  return Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined));
}
