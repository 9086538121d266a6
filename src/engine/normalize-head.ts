/**
 * Turns a transport's view of a request head into the `GateRequestHead` both adapters hand to the
 * engine. Pure and allocation-light: it runs on every request, governed or not.
 */
import { canonicalHost } from '../policy/index.js';
import { connectionNamedHeaders, HOP_BY_HOP_HEADERS } from './hop-by-hop.js';
import type { GateContext, GateRequestHead, HeaderMap } from './types.js';

export interface RawRequestHead {
  readonly scheme: 'http' | 'https';
  readonly method: string;
  /** Host name as found in the target URI; IPv6 literals may keep their brackets. */
  readonly host: string;
  readonly port: number;
  /** Request target path plus `?query` when there is one (no fragment). */
  readonly pathAndQuery: string;
  /** Header map with lower-case names, as node:http gives it. */
  readonly headers: HeaderMap;
}

/** Longest context value accepted; longer ones are ignored rather than truncated (docs/design.md §4.2). */
export const MAX_CONTEXT_VALUE_LENGTH = 200;

/**
 * `context.operation` when `Effectgate-Operation` was sent but cannot be read as one operation id
 * (repeated, too long, control characters; a blank one claims nothing). Unlike a run or a step it is a claim the
 * protocol acts on (docs/design.md §3 "Delegation"), so it is never dropped, which would turn a
 * worker's attempt into a new operation: the gate refuses it (gate.ts). Not an id: it has spaces.
 */
export const UNREADABLE_OPERATION_CLAIM = '(unreadable Effectgate-Operation)';

const CONTEXT_PREFIX = 'effectgate-';
const PROXY_PREFIX = 'proxy-';

// biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point.
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

/**
 * Normalizes a request head: upper-case method, lower-case host without IPv6 brackets or a trailing
 * dot, path normalized (`normalizePath`) and split from the query, and only end-to-end headers
 * kept. Removed: hop-by-hop fields and those named in `Connection`/`Proxy-Connection` (RFC 9110
 * §7.6.1), `Host` (RFC 9112 §3.2.2: a proxy replaces it with the target URI's authority), every
 * `Proxy-*` field (addressed to the gate, RFC 9110 §11.7), and every `Effectgate-*` field after the
 * context ones have been read (docs/design.md §4.2).
 */
export function normalizeHead(raw: RawRequestHead): GateRequestHead {
  const named = connectionNamedHeaders(raw.headers);
  const headers: Record<string, string | string[]> = {};
  const context: Record<string, string> = {};
  const claims: string[] = [];

  for (const name of Object.keys(raw.headers)) {
    const value = raw.headers[name];
    if (value === undefined) continue;
    const lower = name.toLowerCase();
    if (lower === OPERATION_HEADER) {
      // Every spelling and repetition of it, however the front door delivered them.
      claims.push(...(Array.isArray(value) ? value : [value]));
      continue;
    }
    if (lower.startsWith(CONTEXT_PREFIX)) {
      const accepted = contextValue(value);
      if (accepted !== null) context[lower.slice(CONTEXT_PREFIX.length)] = accepted;
      continue;
    }
    if (
      HOP_BY_HOP_HEADERS.has(lower) ||
      lower === 'host' ||
      lower.startsWith(PROXY_PREFIX) ||
      named.has(lower)
    ) {
      continue;
    }
    headers[lower] = value;
  }

  const { path, query } = splitTarget(raw.pathAndQuery);
  return {
    scheme: raw.scheme,
    method: raw.method.toUpperCase(),
    host: normalizeHost(raw.host),
    port: raw.port,
    path: normalizePath(path),
    query,
    headers,
    context: toContext(withClaim(context, operationClaim(claims))),
  };
}

/**
 * Lower-case host; an IPv6 literal loses its brackets; one trailing dot goes (`api.github.com.` is
 * the same fully qualified name as `api.github.com`, and a policy naming the latter must see it);
 * every IP literal takes its canonical form (`[::ffff:127.0.0.1]`, `127.1`, `2130706433` are all
 * `127.0.0.1`), the same function the policy side compiles `hosts` entries with, so a tool on an
 * address cannot be walked past by another spelling of it (docs/design.md §4.1 "Spellings").
 */
export function normalizeHost(host: string): string {
  return canonicalHost(host);
}

/**
 * `host[:port]` for a URL or a Host header: an IPv6 literal gets its brackets back, and the port is
 * left out when it equals `defaultPort`.
 */
export function formatAuthority(host: string, port: number, defaultPort?: number): string {
  const name = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return port === defaultPort ? name : `${name}:${port}`;
}

const PERCENT_ENCODED = /%([0-9A-Fa-f]{2})/g;
const UNRESERVED = /^[A-Za-z0-9._~-]$/;

/**
 * RFC 3986 §6.2.2 syntax-based normalization of a path, in the RFC's order: percent-encoded
 * unreserved characters (ALPHA DIGIT - . _ ~) are decoded, the hex digits of every other `%xx` are
 * upper-cased, then dot segments are removed (§5.2.4). Everything else is kept byte for byte: `%2F`
 * stays encoded (it is data, not a separator), invalid `%` sequences are left alone.
 *
 * The result is both what is classified AND what is forwarded upstream, governed or not: were the
 * gate to classify one spelling and forward another, an agent could dodge a tool by writing
 * `/repos/a/b/%69ssues` or `/repos/a/b/x/../issues`, which the destination resolves to the very
 * route the tool governs.
 */
export function normalizePath(path: string): string {
  const decoded = path.includes('%') ? path.replace(PERCENT_ENCODED, decodeUnreserved) : path;
  return decoded.includes('.') ? removeDotSegments(decoded) : decoded;
}

function decodeUnreserved(match: string, hex: string): string {
  const char = String.fromCharCode(Number.parseInt(hex, 16));
  return UNRESERVED.test(char) ? char : match.toUpperCase();
}

/** RFC 3986 §5.2.4, on whole segments. */
function removeDotSegments(path: string): string {
  const segments = path.split('/');
  const out: string[] = [];
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i]!;
    const last = i === segments.length - 1;
    if (segment === '.' || segment === '..') {
      if (segment === '..' && out.length > 1) out.pop();
      // A final dot segment leaves the directory it names: `/a/b/..` → `/a/`.
      if (last) out.push('');
      continue;
    }
    out.push(segment);
  }
  return out.join('/');
}

function splitTarget(pathAndQuery: string): { path: string; query: string } {
  const hash = pathAndQuery.indexOf('#');
  const target = hash === -1 ? pathAndQuery : pathAndQuery.slice(0, hash);
  const q = target.indexOf('?');
  const path = q === -1 ? target : target.slice(0, q);
  const query = q === -1 ? '' : target.slice(q + 1);
  // RFC 9112 §3.2.1: an empty path is sent as "/".
  return { path: path === '' ? '/' : path, query };
}

const OPERATION_HEADER = `${CONTEXT_PREFIX}operation`;

/**
 * One readable operation id, or `UNREADABLE_OPERATION_CLAIM` (node:http joins repeats with ", ");
 * `null` when every value is blank: an empty header claims nothing (templated clients send one).
 */
function operationClaim(values: readonly string[]): string | null {
  const given = values.filter((v) => v.trim() !== '');
  if (given.length === 0) return null;
  const one = given.length === 1 ? contextValue(given[0]!) : null;
  return one === null || one.includes(',') ? UNREADABLE_OPERATION_CLAIM : one;
}

function withClaim(context: Record<string, string>, claim: string | null): Record<string, string> {
  return claim === null ? context : { ...context, operation: claim };
}

function contextValue(value: string | string[]): string | null {
  // A repeated context header is ambiguous; take the first and let validation judge it.
  const first = Array.isArray(value) ? value[0] : value;
  if (first === undefined) return null;
  const trimmed = first.trim();
  if (trimmed === '' || trimmed.length > MAX_CONTEXT_VALUE_LENGTH || CONTROL_CHARACTERS.test(trimmed)) {
    return null;
  }
  return trimmed;
}

function toContext(found: Record<string, string>): GateContext {
  return {
    run: found['run'] ?? null,
    step: found['step'] ?? null,
    operation: found['operation'] ?? null,
    worker: found['worker'] ?? null,
    agentVersion: found['agent-version'] ?? null,
    retryReason: found['retry-reason'] ?? null,
  };
}
