/**
 * Request-target parsing for a forward proxy (RFC 9112 §3.2): absolute-form for ordinary requests,
 * authority-form for CONNECT, origin-form inside a CONNECT tunnel. The path is kept exactly as
 * sent here; `normalizeHead` normalizes it (RFC 3986 §6.2.2) for classification and forwarding.
 */
import { formatAuthority, normalizeHost } from '../engine/index.js';

export interface Authority {
  /** Host name as the URL parser canonicalizes it (lower-case, IDNA); IPv6 keeps brackets. */
  readonly host: string;
  readonly port: number;
}

/** A CONNECT tunnel's authority and what its requests are: plain HTTP, or intercepted HTTPS. */
export interface TunnelAuthority extends Authority {
  readonly scheme: 'http' | 'https';
}

export interface AbsoluteTarget extends Authority {
  readonly scheme: 'http' | 'https';
  /** Path plus `?query`, fragment removed, `/` when the URL had no path. */
  readonly pathAndQuery: string;
}

export type ParseResult<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly reason: string };

const ABSOLUTE_FORM = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)([^#]*)/;
const SCHEME_PREFIX = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//;
const DEFAULT_PORTS = { http: 80, https: 443 } as const;

export function parseAbsoluteTarget(target: string): ParseResult<AbsoluteTarget> {
  const m = ABSOLUTE_FORM.exec(target);
  if (m === null) {
    return {
      ok: false,
      reason: 'This is a forward proxy: requests must use an absolute URL (http://host/path).',
    };
  }
  const scheme = m[1]!.toLowerCase();
  if (scheme !== 'http' && scheme !== 'https') {
    return {
      ok: false,
      reason: `Scheme ${scheme}: is not proxied; only http:// (and https:// via CONNECT).`,
    };
  }
  const authority = parseAuthority(m[2]!, DEFAULT_PORTS[scheme]);
  if (!authority.ok) return authority;
  const rest = m[3]!;
  if (rest !== '' && !rest.startsWith('/') && !rest.startsWith('?')) {
    return { ok: false, reason: 'The request URL has an invalid path.' };
  }
  const pathAndQuery = rest === '' || rest.startsWith('?') ? `/${rest}` : rest;
  return { ok: true, value: { scheme, ...authority.value, pathAndQuery } };
}

/**
 * Parses `host[:port]` (`[v6]:port` for IPv6). `defaultPort` null means a port is required, as in
 * CONNECT's authority-form. User information is refused (RFC 9110 §4.2.4).
 */
export function parseAuthority(authority: string, defaultPort: number | null): ParseResult<Authority> {
  // Every request parses its authority, and a client sends the same few again and again: the
  // WHATWG URL parser runs once per authority (and default port), not once per request.
  let known = parsedAuthorities.get(defaultPort);
  if (known === undefined) {
    known = new Map();
    parsedAuthorities.set(defaultPort, known);
  }
  const seen = known.get(authority);
  if (seen !== undefined) return seen;
  const parsed = Object.freeze(parseAuthorityOnce(authority, defaultPort));
  if (known.size >= MAX_PARSED_AUTHORITIES) known.clear();
  known.set(authority, parsed);
  return parsed;
}

/** Bounded: many distinct authorities (a scan, a crawler) start it over rather than grow it. */
const MAX_PARSED_AUTHORITIES = 1024;
/** Per default port (`null`: a port is required), by authority. */
const parsedAuthorities = new Map<number | null, Map<string, ParseResult<Authority>>>();

function parseAuthorityOnce(authority: string, defaultPort: number | null): ParseResult<Authority> {
  if (authority === '' || authority.includes('@')) {
    return { ok: false, reason: 'The request target has no usable host (or carries user information).' };
  }
  let url: URL;
  try {
    url = new URL(`http://${authority}`);
  } catch {
    return { ok: false, reason: `The request target authority ${JSON.stringify(authority)} is not valid.` };
  }
  // The URL parser drops a port equal to the http default (80); recover it from the input.
  const explicit = /:(\d+)$/.exec(authority);
  const port = explicit !== null ? Number(explicit[1]) : defaultPort;
  if (port === null || !Number.isInteger(port) || port < 1 || port > 65_535) {
    return {
      ok: false,
      reason: `The request target ${JSON.stringify(authority)} needs a port between 1 and 65535.`,
    };
  }
  if (url.hostname === '' || url.pathname !== '/' || url.search !== '' || url.hash !== '') {
    return { ok: false, reason: `The request target authority ${JSON.stringify(authority)} is not valid.` };
  }
  return { ok: true, value: Object.freeze({ host: url.hostname, port }) };
}

/**
 * The target of a plain-HTTP request read inside a CONNECT tunnel to `tunnel`. The CONNECT
 * authority is what the client asked the proxy for, so it is the target: origin-form (`/path`, the
 * usual shape) goes to it, and a `Host` naming anything else is refused rather than obeyed (the
 * client and the proxy would disagree about the destination). Absolute-form is accepted when it
 * names the tunnel's own authority; its `Host` is ignored as for any absolute-form request.
 */
export function parseTunnelTarget(
  target: string,
  tunnel: TunnelAuthority,
  host: string | undefined,
): ParseResult<AbsoluteTarget> {
  const name = formatAuthority(tunnel.host, tunnel.port);
  if (SCHEME_PREFIX.test(target)) {
    const absolute = parseAbsoluteTarget(target);
    if (absolute.ok && (absolute.value.scheme !== tunnel.scheme || !sameAuthority(absolute.value, tunnel))) {
      return {
        ok: false,
        reason: `This tunnel was opened to ${name}; it cannot carry a request for ${target}.`,
      };
    }
    return absolute;
  }
  if (!target.startsWith('/')) {
    return { ok: false, reason: `Requests inside the tunnel to ${name} must use origin-form (/path).` };
  }
  if (host !== undefined) {
    const given = parseAuthority(host, DEFAULT_PORTS[tunnel.scheme]);
    if (!given.ok || !sameAuthority(given.value, tunnel)) {
      return {
        ok: false,
        reason: `This tunnel was opened to ${name}; the request's Host ${JSON.stringify(host)} names another destination.`,
      };
    }
  }
  const hash = target.indexOf('#');
  const pathAndQuery = hash === -1 ? target : target.slice(0, hash);
  return { ok: true, value: { scheme: tunnel.scheme, host: tunnel.host, port: tunnel.port, pathAndQuery } };
}

function sameAuthority(a: Authority, b: Authority): boolean {
  return a.port === b.port && normalizeHost(a.host) === normalizeHost(b.host);
}
