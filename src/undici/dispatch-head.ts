/** Turning undici dispatch options into the gate's request head: origin, path and query, headers. */
import { stringify as stringifyQuery } from 'node:querystring';
import type { Dispatcher } from 'undici';
import {
  type GateRequestHead,
  type HeaderMap,
  MAX_CONTEXT_VALUE_LENGTH,
  normalizeHost,
} from '../engine/index.js';
import { EffectgateError } from '../errors.js';

type DispatchOptions = Dispatcher.DispatchOptions;

export interface Origin {
  readonly scheme: 'http' | 'https';
  readonly host: string;
  readonly port: number;
}
const CONTEXT_PREFIX = 'effectgate-';
// biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point.
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;
const origins = new Map<string, Origin | null>();
const MAX_CACHED_ORIGINS = 1024;

export function parseOrigin(origin: string | URL | undefined): Origin | null {
  if (origin === undefined) return null;
  const key = typeof origin === 'string' ? origin : origin.origin;
  const cached = origins.get(key);
  if (cached !== undefined) return cached;
  let parsed: Origin | null = null;
  try {
    const url = new URL(key);
    if (url.protocol === 'http:' || url.protocol === 'https:') {
      const scheme = url.protocol === 'http:' ? 'http' : 'https';
      const port = url.port === '' ? (scheme === 'http' ? 80 : 443) : Number(url.port);
      // Canonical (no brackets, IPv4-mapped IPv6 as IPv4): the host the engine classifies.
      parsed = { scheme, host: normalizeHost(url.hostname), port };
    }
  } catch {
    parsed = null;
  }
  if (origins.size >= MAX_CACHED_ORIGINS) origins.clear();
  origins.set(key, parsed);
  return parsed;
}

export function withQuery(path: string, query: Record<string, unknown>): string {
  // As undici's own `serializePathWithQuery` (node:querystring).
  const serialized = stringifyQuery(query as Parameters<typeof stringifyQuery>[0]);
  return serialized === '' ? path : `${path}?${serialized}`;
}

/** Whether the request carries an `Effectgate-*` header (which must be stripped before it leaves). */
export function hasContextHeader(map: HeaderMap): boolean {
  for (const name in map) if (name.startsWith(CONTEXT_PREFIX)) return true;
  return false;
}

export type HeaderValue =
  | string
  | string[]
  | number
  | Buffer
  | readonly (string | Buffer)[]
  | null
  | undefined;

/**
 * undici accepts headers as an object, a flat `[name, value, …]` array, or an iterable of pairs
 * (an array of pairs, a `Map`, a `Headers`); the engine wants lower-case names with string values.
 */
export function toHeaderMap(headers: DispatchOptions['headers']): HeaderMap {
  const map: HeaderMap = {};
  if (headers == null) return map;
  if (Array.isArray(headers)) {
    if (headers.length > 0 && Array.isArray(headers[0])) {
      for (const pair of headers as unknown as [string, HeaderValue][]) add(map, pair[0], pair[1]);
    } else {
      for (let i = 0; i + 1 < headers.length; i += 2) add(map, headers[i] as string, headers[i + 1]);
    }
    return map;
  }
  if (typeof (headers as Iterable<unknown>)[Symbol.iterator] === 'function') {
    for (const pair of headers as Iterable<[string, HeaderValue]>) add(map, pair[0], pair[1]);
    return map;
  }
  const record = headers as Record<string, HeaderValue>;
  for (const name in record) add(map, name, record[name]);
  return map;
}

export function add(map: HeaderMap, rawName: string | Buffer, rawValue: HeaderValue): void {
  if (rawValue == null) return;
  const name = (typeof rawName === 'string' ? rawName : rawName.toString('latin1')).toLowerCase();
  const value = Array.isArray(rawValue) ? rawValue.map(headerString) : headerString(rawValue as string);
  const existing = map[name];
  if (existing === undefined) {
    map[name] = value;
  } else {
    map[name] = ([] as string[]).concat(existing, value);
  }
}

function headerString(value: string | Buffer | number): string {
  if (typeof value === 'string') return value;
  return Buffer.isBuffer(value) ? value.toString('latin1') : String(value);
}

/** Whether `target`'s path is already the normalized `path` (the common case: no copy needed). */
export function samePath(target: string, path: string): boolean {
  if (!target.startsWith(path)) return false;
  if (target.length === path.length) return true;
  const next = target.charCodeAt(path.length);
  return next === 0x3f /* ? */ || next === 0x23; /* # */
}

/**
 * An ungoverned request that needs a copy: the normalized path (what was classified is what is
 * sent, docs/design.md §4.2) and no `Effectgate-*` headers. Every other header is the caller's own.
 */
export function rewritten(opts: DispatchOptions, head: GateRequestHead, headers: HeaderMap): DispatchOptions {
  const out: Record<string, string | string[]> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined && !name.startsWith(CONTEXT_PREFIX)) out[name] = value;
  }
  const path = head.query === '' ? head.path : `${head.path}?${head.query}`;
  return { ...opts, path, query: undefined, headers: out } as DispatchOptions;
}

export function checkContextValue(name: string, value: unknown): string {
  if (
    typeof value !== 'string' ||
    value.trim() === '' ||
    value.length > MAX_CONTEXT_VALUE_LENGTH ||
    CONTROL_CHARACTERS.test(value)
  ) {
    throw new EffectgateError(
      'EG_ERR_CONFIG_INVALID',
      `${name} must be a non-empty string of at most ${MAX_CONTEXT_VALUE_LENGTH} characters without control characters; got ${JSON.stringify(value)}`,
    );
  }
  return value.trim();
}

// ---------------------------------------------------------------------------------------------
// Governed request body.

/** The whole body, or `null` when it is longer than `limit` (a stream is then abandoned). */
