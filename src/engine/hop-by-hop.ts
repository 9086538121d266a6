/**
 * Hop-by-hop header handling shared by both adapters (forward proxy, undici interceptor).
 *
 * RFC 9110 §7.6.1: a proxy MUST remove the fields named in `Connection` and the connection-specific
 * fields (`Proxy-Connection`, `Keep-Alive`, `TE`, `Transfer-Encoding`, `Upgrade`) before forwarding.
 * RFC 9112 §6.1: `Transfer-Encoding` describes this hop's framing only; the next hop re-frames.
 * RFC 9110 §11.7: `Proxy-Authenticate`/`Proxy-Authorization` are consumed by the proxy they address.
 */
import type { HeaderMap } from './types.js';

/** Header names (lower-case) that describe one connection and never travel past it. */
export const HOP_BY_HOP_HEADERS: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/**
 * The extra header names a message declares hop-by-hop through its `Connection` (and the legacy
 * `Proxy-Connection`) field, lower-cased (RFC 9110 §7.6.1). Asked twice of every proxied request
 * (its head, its answer's head): no field, or the usual lone `keep-alive` (already hop-by-hop),
 * names nothing more and shares one empty set.
 */
export function connectionNamedHeaders(headers: HeaderMap): ReadonlySet<string> {
  const connection = headers['connection'];
  const proxyConnection = headers['proxy-connection'];
  if (namesNothingMore(connection) && namesNothingMore(proxyConnection)) return NOTHING_NAMED;
  const named = new Set<string>();
  addTokens(named, connection);
  addTokens(named, proxyConnection);
  return named;
}

const NOTHING_NAMED: ReadonlySet<string> = new Set();

/**
 * Whether `value` names no field but a hop-by-hop one (which goes anyway): absent, or one such
 * token, as nearly every client and server sends it.
 */
function namesNothingMore(value: string | string[] | undefined): boolean {
  if (value === undefined) return true;
  return typeof value === 'string' && HOP_BY_HOP_HEADERS.has(value.trim().toLowerCase());
}

function addTokens(into: Set<string>, value: string | string[] | undefined): void {
  if (value === undefined) return;
  const values = Array.isArray(value) ? value : [value];
  for (const v of values) {
    for (const token of v.split(',')) {
      const name = token.trim().toLowerCase();
      if (name !== '') into.add(name);
    }
  }
}

/**
 * A copy of `headers` without hop-by-hop fields nor the fields named in `Connection`; `undefined`
 * values are dropped. Names are expected lower-case (node:http and undici give them so).
 */
export function stripHopByHop(headers: HeaderMap): Record<string, string | string[]> {
  const named = connectionNamedHeaders(headers);
  const out: Record<string, string | string[]> = {};
  for (const name of Object.keys(headers)) {
    const value = headers[name];
    if (value === undefined) continue;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP_HEADERS.has(lower) || named.has(lower)) continue;
    out[lower] = value;
  }
  return out;
}
