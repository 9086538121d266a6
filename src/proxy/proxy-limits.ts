/**
 * The forward proxy's resource limits, all in one place: how long a client may hold a connection
 * or a tunnel without using it, and how many connections the proxy and any one client may hold.
 * Without them, idle tunnels from one agent could take every file descriptor the gate has and
 * every other agent's requests would fail (measured: 92 idle tunnels did). The caps are also fitted
 * under the process's own open-file limit (`resolveLimits`), whatever they were set to.
 */

import type { GateLogger } from '../engine/index.js';

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
   * Client connections the proxy holds at once (each may hold an upstream socket too, so it is
   * lowered to fit half the process's descriptor limit). Over it new connections get a 503 and are
   * closed.
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

/**
 * Descriptors kept out of the connection caps' budget: the embedded store's data files (about 50
 * open when idle, more under load), the admin listener, logs, worker threads, stdio.
 */
export const DESCRIPTOR_RESERVE = 128;

/**
 * The defaults with `overrides` applied, checked (a limit of 0 or less would refuse everything),
 * and the connection caps fitted under `descriptors` (the open-file limit, `null` when unknown):
 * each connection may cost two descriptors (the client's and its upstream socket, or a tunnel's
 * two ends), so at most `floor((descriptors - DESCRIPTOR_RESERVE) / 2)` connections in all. A
 * lowered total lowers the default per-client cap in proportion; a per-client cap that was set
 * stays as set while it fits under the total. Caps that fit are kept as they are.
 */
export function resolveLimits(
  overrides: Partial<ProxyLimits> = {},
  descriptors: number | null = null,
): ProxyLimits {
  const limits: ProxyLimits = { ...DEFAULT_PROXY_LIMITS, ...withoutUndefined(overrides) };
  for (const [name, value] of Object.entries(limits)) {
    if (!Number.isInteger(value) || value <= 0) {
      throw new RangeError(`Proxy limit ${name} must be a positive integer, not ${String(value)}.`);
    }
  }
  if (descriptors === null) return Object.freeze(limits);
  const budget = Math.max(1, Math.floor((descriptors - DESCRIPTOR_RESERVE) / 2));
  const maxConnections = Math.min(limits.maxConnections, budget);
  const perClient = limits.maxConnectionsPerClient;
  const maxConnectionsPerClient =
    overrides.maxConnectionsPerClient === undefined
      ? Math.max(1, Math.min(perClient, Math.floor((perClient * maxConnections) / limits.maxConnections)))
      : Math.min(perClient, maxConnections);
  return Object.freeze({ ...limits, maxConnections, maxConnectionsPerClient });
}

function withoutUndefined(values: Partial<ProxyLimits>): Partial<ProxyLimits> {
  return Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined));
}

/**
 * `resolveLimits` under the open-file limit, said once when it lowered a cap: a cap over what the
 * process can hold would let connections fail with EMFILE (everyone's, and the store's) first.
 */
export function fitLimits(
  overrides: Partial<ProxyLimits> | undefined,
  descriptorLimit: number | null,
  logger: GateLogger | undefined,
): ProxyLimits {
  const configured = resolveLimits(overrides);
  const limits = resolveLimits(overrides, descriptorLimit);
  if (
    limits.maxConnections < configured.maxConnections ||
    limits.maxConnectionsPerClient < configured.maxConnectionsPerClient
  ) {
    logger?.warn(
      {
        descriptor_limit: descriptorLimit,
        descriptor_reserve: DESCRIPTOR_RESERVE,
        max_connections: limits.maxConnections,
        max_connections_per_client: limits.maxConnectionsPerClient,
        configured: {
          max_connections: configured.maxConnections,
          max_connections_per_client: configured.maxConnectionsPerClient,
        },
      },
      `connection caps lowered to fit the file-descriptor limit (ulimit -n ${descriptorLimit}): ${limits.maxConnections} in all, ${limits.maxConnectionsPerClient} per client address; raise the limit to keep the configured caps`,
    );
  }
  return limits;
}
