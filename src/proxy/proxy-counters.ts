/**
 * What the proxy refused or cut on its own (limits, tunnel checks), counted so an operator can see
 * it: none of these reach the engine, so the gate's metrics never see them. Read with
 * `ProxyServer.counters()`.
 */

export interface ProxyCountersSnapshot {
  /** New connections refused because the proxy held `maxConnections`. */
  readonly connectionsRefusedGlobal: number;
  /** New connections refused because their remote address held `maxConnectionsPerClient`. */
  readonly connectionsRefusedPerClient: number;
  /**
   * Idle connections (no complete request head yet, kept alive between requests, or a tunnel that
   * has said nothing) closed at a cap to make room for a new one.
   */
  readonly connectionsClosedIdle: number;
  /** Tunnels closed because no first bytes (or no complete ClientHello) came in time. */
  readonly tunnelsPeekTimedOut: number;
  /** Relayed tunnels and upgraded connections closed after `tunnelIdleTimeoutMs` of silence. */
  readonly tunnelsIdleClosed: number;
  /** TLS tunnels closed because their SNI names a host the gate refuses (`default: block`). */
  readonly tunnelsRefusedSniBlocked: number;
  /** TLS tunnels closed because their SNI or CONNECT host is a governed host and the proxy has no CA. */
  readonly tunnelsRefusedSniUngovernable: number;
  /** TLS tunnels closed because their ClientHello could not be read (malformed, too large). */
  readonly tunnelsRefusedBadClientHello: number;
  /**
   * Tunnels closed on a port open only because a tool names the host there (not in
   * `--allow-connect-ports`), because they carried something the gate cannot govern there.
   */
  readonly tunnelsRefusedUnreadable: number;
  /** Requests and tunnels refused before connecting: their address is denied by `egress`. */
  readonly destinationsRefused: number;
  /** CONNECTs refused for their port (not in `--allow-connect-ports`). */
  readonly connectsRefusedPort: number;
}

export type ProxyCounter = keyof ProxyCountersSnapshot;

export class ProxyCounters {
  readonly #counts: Record<ProxyCounter, number> = {
    connectionsRefusedGlobal: 0,
    connectionsRefusedPerClient: 0,
    connectionsClosedIdle: 0,
    tunnelsPeekTimedOut: 0,
    tunnelsIdleClosed: 0,
    tunnelsRefusedSniBlocked: 0,
    tunnelsRefusedSniUngovernable: 0,
    tunnelsRefusedBadClientHello: 0,
    tunnelsRefusedUnreadable: 0,
    destinationsRefused: 0,
    connectsRefusedPort: 0,
  };

  increment(counter: ProxyCounter): void {
    this.#counts[counter] += 1;
  }

  snapshot(): ProxyCountersSnapshot {
    return Object.freeze({ ...this.#counts });
  }
}
