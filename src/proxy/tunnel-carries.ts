/**
 * What a CONNECT tunnel gets once its client's first bytes are peeked (docs/design.md §4.2, see
 * `peekTunnel`): served as plain HTTP, relayed byte for byte, intercepted with the local CA, or
 * closed. A decision only: `ConnectTunnel` carries it out. Hosts no tool names are never
 * decrypted; a governed host's TLS is never relayed unread, whether its SNI or the CONNECT
 * authority names it.
 */
import type { RouteDecision } from '../engine/index.js';
import { normalizeHost } from '../engine/index.js';
import type { Authority } from './parse-target.js';
import type { ProxyCounter } from './proxy-counters.js';
import type { Peeked } from './tunnel-peek.js';

/** What a peeked tunnel gets. */
export type Carries =
  | { readonly kind: 'relay' }
  | { readonly kind: 'serve' }
  | { readonly kind: 'intercept'; readonly authority: Authority }
  | { readonly kind: 'close'; readonly counter: ProxyCounter | null; readonly reason: string };

/** How the tunnel's names are routed: the CONNECT authority's decision, and any other host's. */
export interface TunnelRouting {
  readonly authority: Authority;
  readonly decision: RouteDecision;
  readonly route: (host: string) => RouteDecision;
  /**
   * Open only because a tool names the host on this port (not in `allowPorts`): only what the gate
   * reads and governs goes through it, never a relay.
   */
  readonly toolPort: boolean;
}

/**
 * What the tunnel gets, from what it was seen to carry. `canIntercept`: the gate has a local CA
 * (`--ca-dir`) to terminate TLS with.
 */
export function tunnelCarries(peeked: Peeked, routing: TunnelRouting, canIntercept: boolean): Carries {
  return onlyGoverned(carries(peeked, routing, canIntercept), routing);
}

function carries(peeked: Peeked, routing: TunnelRouting, canIntercept: boolean): Carries {
  switch (peeked.kind) {
    case 'http':
      return { kind: 'serve' };
    case 'server_first':
      return { kind: 'relay' };
    case 'closed':
      return { kind: 'close', counter: null, reason: 'the client left before sending a byte' };
    case 'timeout':
      return { kind: 'close', counter: 'tunnelsPeekTimedOut', reason: 'nothing decisive came in time' };
    case 'bad_tls':
      return { kind: 'close', counter: 'tunnelsRefusedBadClientHello', reason: peeked.reason };
    case 'tls':
      return carriesTls(peeked.serverName, routing, canIntercept);
  }
}

/** On a port open only for a tool, nothing is relayed unread: closed instead. */
function onlyGoverned(carries: Carries, routing: TunnelRouting): Carries {
  if (!routing.toolPort || carries.kind !== 'relay') return carries;
  return {
    kind: 'close',
    counter: 'tunnelsRefusedUnreadable',
    reason: `port ${routing.authority.port} is open to tunnels only for the HTTP a tool names there, and this tunnel carries something else (the destination spoke first)`,
  };
}

function carriesTls(serverName: string | null, routing: TunnelRouting, canIntercept: boolean): Carries {
  const { authority, decision } = routing;
  const sni = serverName === null ? null : normalizeHost(serverName);
  const sniDecision = sni === null ? null : sni === authority.host ? decision : routing.route(sni);
  if (sni !== null && sniDecision?.kind === 'refuse') {
    return {
      kind: 'close',
      counter: 'tunnelsRefusedSniBlocked',
      reason: `its SNI ${sni} is refused by the policies`,
    };
  }
  if (sni !== null && sniDecision?.kind === 'govern') {
    if (!canIntercept) {
      return {
        kind: 'close',
        counter: 'tunnelsRefusedSniUngovernable',
        reason: `its SNI ${sni} is a governed host and the gate has no CA (--ca-dir) to intercept it`,
      };
    }
    return { kind: 'intercept', authority: { host: sni, port: authority.port } };
  }
  if (decision.kind !== 'govern') return { kind: 'relay' };
  if (canIntercept) return { kind: 'intercept', authority };
  // The CONNECT names a governed host and the gate cannot read what the tunnel carries: an SNI
  // left out or naming another host does not make it safe to relay (the destination's default
  // virtual host answers, and the POST goes out ungoverned).
  return {
    kind: 'close',
    counter: 'tunnelsRefusedSniUngovernable',
    reason: `it carries TLS to ${authority.host}:${authority.port}, a governed destination, ${sni === null ? 'without an SNI' : `with the SNI ${sni}`}, and the gate has no CA (--ca-dir) to intercept it`,
  };
}
