import { isIP } from 'node:net';
import { canonicalHost } from './canonical-host.js';

/** One compiled `match.hosts` entry. */
export interface HostPattern {
  /** `exact` compares the whole host; `wildcard` matches any subdomain (any depth) of `suffix`. */
  readonly kind: 'exact' | 'wildcard';
  /** Exact: the canonical host (IPv6 without brackets). Wildcard: the suffix with its dot, `.example.com`. */
  readonly host: string;
  /** `null` when the entry names no port: any port matches. */
  readonly port: number | null;
  /** Canonical spelling, used in `explain()` and to detect overlapping tools. */
  readonly text: string;
}

const LABEL = '[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?';
const HOSTNAME = new RegExp(`^${LABEL}(?:\\.${LABEL})*$`);

/**
 * Parses a `hosts` entry: `api.github.com`, `*.example.com`, `10.0.0.7`, `::1`, `host:8443`,
 * `[::1]:8443`. Names are canonicalized the way the WHATWG URL parser does it (lower case,
 * punycode, IPv4 forms), because that is how the proxy sees request hosts. Throws on anything else.
 */
export function parseHostPattern(entry: string): HostPattern {
  const raw = entry.trim();
  let hostPart: string;
  let port: number | null = null;
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(raw);
  if (bracketed !== null) {
    hostPart = bracketed[1]!;
    if (isIP(hostPart) !== 6) throw new Error(`[${hostPart}] is not an IPv6 address`);
    if (bracketed[2] !== undefined) port = parsePort(bracketed[2]);
  } else if (raw.split(':').length > 2) {
    // Several colons and no brackets: only a bare IPv6 literal is unambiguous.
    if (isIP(raw) !== 6)
      throw new Error(`${JSON.stringify(entry)} is not a host; write IPv6 with a port as [::1]:8443`);
    hostPart = raw;
  } else {
    const colon = raw.indexOf(':');
    hostPart = colon === -1 ? raw : raw.slice(0, colon);
    if (colon !== -1) port = parsePort(raw.slice(colon + 1));
  }
  const portText = port === null ? '' : `:${port}`;
  if (hostPart === '*')
    throw new Error('a bare * would govern every host; name the hosts or use *.example.com');
  if (hostPart.startsWith('*.')) {
    const suffix = canonicalName(hostPart.slice(2), entry);
    if (isIP(suffix) !== 0)
      throw new Error(`${JSON.stringify(entry)}: a wildcard needs a domain name, not an IP`);
    return { kind: 'wildcard', host: `.${suffix}`, port, text: `*.${suffix}${portText}` };
  }
  if (hostPart.includes('*'))
    throw new Error(`${JSON.stringify(entry)}: * is only allowed as a whole first label (*.example.com)`);
  if (isIP(hostPart) === 6) {
    // canonicalHost, as the request side: an IPv4-mapped entry (`::ffff:10.0.0.7`) is that IPv4.
    const ip = canonicalHost(hostPart);
    const text = isIP(ip) === 6 && port !== null ? `[${ip}]${portText}` : `${ip}${portText}`;
    return { kind: 'exact', host: ip, port, text };
  }
  const host = canonicalHost(canonicalName(hostPart, entry));
  return { kind: 'exact', host, port, text: `${host}${portText}` };
}

/** True when `pattern` covers a request to `host` (lower case, no brackets) on `port`. */
export function hostMatches(pattern: HostPattern, host: string, port: number): boolean {
  if (pattern.port !== null && pattern.port !== port) return false;
  if (pattern.kind === 'exact') return pattern.host === host;
  return host.length > pattern.host.length && host.endsWith(pattern.host);
}

/** Two entries overlap when they name the same host (or pattern) and could meet on the same port. */
export function hostsOverlap(a: HostPattern, b: HostPattern): boolean {
  return a.kind === b.kind && a.host === b.host && (a.port === null || b.port === null || a.port === b.port);
}

function parsePort(text: string): number {
  const port = /^\d{1,5}$/.test(text) ? Number(text) : Number.NaN;
  if (!(port >= 1 && port <= 65535))
    throw new Error(`port ${JSON.stringify(text)} is not between 1 and 65535`);
  return port;
}

function canonicalName(name: string, entry: string): string {
  // The URL parser would silently drop a path, user info or fragment; refuse them instead.
  if (!/^[^\s/?#@\\[\]%]+$/.test(name)) throw new Error(`${JSON.stringify(entry)} is not a valid host name`);
  let host: string;
  try {
    host = new URL(`http://${name}/`).hostname;
  } catch {
    throw new Error(`${JSON.stringify(entry)} is not a valid host name`);
  }
  if (!HOSTNAME.test(host) || host.length > 253)
    throw new Error(`${JSON.stringify(entry)} is not a valid host name`);
  return host;
}
