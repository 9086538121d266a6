/**
 * Which tool a request head is, whatever spelling it comes in (docs/design.md §4.1 "Spellings"): the
 * host as canonicalized by `normalizeHead`, or the governed name an IP literal belongs to
 * (`GovernedAddresses`); the method a method-override names when a tool on the route governs it;
 * and, when nothing matches strictly, whether a lenient server would route it to a tool anyway
 * (a near miss, which the gate refuses rather than lets out ungoverned).
 *
 * Cost for a host no tool names: one Map lookup for the address and the classifier's own
 * pre-check; no header is read, no query parsed, no DNS asked.
 */
import type { Classification, Classifier, LenientMatch } from '../policy/index.js';
import type { GateRequestHead, HeaderMap } from './types.js';

/** Method-override headers common frameworks honour (Rails, Express method-override, ASP.NET, Symfony). */
const OVERRIDE_HEADERS = ['x-http-method-override', 'x-http-method', 'x-method-override'] as const;
const METHOD_PARAM = '_method';
const TOKEN = /^[A-Za-z]+$/;
const NONE: readonly Classification[] = Object.freeze([]);
const NO_OVERRIDES: readonly MethodOverride[] = Object.freeze([]);

/** A method the request asks a server to use instead of its own, and where it said so. */
export interface MethodOverride {
  readonly method: string;
  /** `x-http-method-override`, `?_method`, or `body _method`. */
  readonly source: string;
}

export interface HeadRoute {
  /** Tools the head matches under `host` and `method`, in selection order (empty: ungoverned). */
  readonly candidates: readonly Classification[];
  /** The method classified by: an override that a tool on the route governs, else the real one. */
  readonly method: string;
  /** Set when `method` came from an override. */
  readonly override: MethodOverride | null;
  /** The governed host name the request was classified as, when it was addressed by one of its IPs. */
  readonly resolvedHost: string | null;
  /**
   * Set when servers may route the request to different governed routes (an override names one
   * tool, the sent method or another override another): the gate cannot tell which effect it is,
   * and refuses it. `candidates` is then empty.
   */
  readonly conflict: string | null;
}

/**
 * The governed host names an IP literal belongs to (`GovernedAddresses` on the event loop; in a
 * body-analysis worker, the names the event loop found for this one request's host).
 */
export interface AddressNames {
  namesFor(address: string): readonly string[];
}

export class RouteClassifier {
  readonly #classifier: Classifier;
  readonly #addresses: AddressNames;

  constructor(classifier: Classifier, addresses: AddressNames) {
    this.#classifier = classifier;
    this.#addresses = addresses;
  }

  /** Whether a tool may govern requests to `host:port` (CONNECT interception), by name or address. */
  mayGovern(host: string, port: number): boolean {
    return this.#hosts(host, port).length > 0;
  }

  /**
   * The tools `head` is. `body` is the parsed body once it has been read (a form's `_method` is an
   * override too); `undefined` from `route()`, which sees only the head.
   */
  classify(head: GateRequestHead, body?: unknown): HeadRoute {
    const hosts = this.#hosts(head.host, head.port);
    if (hosts.length === 0) return ungoverned(head);
    const overrides = methodOverrides(head, body);
    for (const host of hosts) {
      const resolvedHost = host === head.host ? null : host;
      const sent = this.#classifier.candidates(host === head.host ? head : { ...head, host });
      // Servers disagree on overrides (Rails and Laravel honour `_method` and the headers, in
      // opposite orders; Django, Flask and Go honour none), so every method the request may be
      // dispatched as is a reading. One governed route among them: that is the tool. Two: refused.
      let chosen: HeadRoute | null =
        sent.length > 0
          ? { candidates: sent, method: head.method, override: null, resolvedHost, conflict: null }
          : null;
      for (const override of overrides) {
        if (override.method === head.method || override.method === chosen?.method) continue;
        const candidates = this.#classifier.candidates({ ...head, host, method: override.method });
        if (candidates.length === 0) continue;
        if (chosen !== null) return conflicting(head, chosen, override);
        chosen = { candidates, method: override.method, override, resolvedHost, conflict: null };
      }
      if (chosen !== null) return chosen;
    }
    return ungoverned(head);
  }

  /**
   * A tool `head` misses strictly but would hit under a lenient server's reading, or (`route`
   * given, with candidates) one of its strict candidates that a lenient reading reaches with other
   * captures; `null` if none.
   */
  nearMiss(head: GateRequestHead, route?: HeadRoute): LenientMatch | null {
    if (route !== undefined && route.candidates.length > 0) {
      const host = route.resolvedHost ?? head.host;
      const input = { host, port: head.port, method: route.method, path: head.path };
      return this.#classifier.lenient(input, route.candidates);
    }
    const hosts = this.#hosts(head.host, head.port);
    if (hosts.length === 0) return null;
    const overrides = methodOverrides(head, undefined);
    for (const host of hosts) {
      const near = this.#classifier.lenient({ host, port: head.port, method: head.method, path: head.path });
      if (near !== null) return near;
      for (const { method } of overrides) {
        const near = this.#classifier.lenient({ host, port: head.port, method, path: head.path });
        if (near !== null) return near;
      }
    }
    return null;
  }

  /**
   * Whether the body must be read to classify a head that matched nothing: a body may carry
   * `_method` (a form or multipart field to Rails, also a JSON member to Laravel), and a tool on
   * this very path governs some method.
   */
  needsBody(head: GateRequestHead): boolean {
    if (!hasBody(head.headers)) return false;
    for (const host of this.#hosts(head.host, head.port)) {
      if (this.#classifier.governsPath({ host, port: head.port, path: head.path })) return true;
    }
    return false;
  }

  /** The governed hosts a request to `host:port` is: itself, and the names an address belongs to. */
  #hosts(host: string, port: number): readonly string[] {
    const names = this.#addresses.namesFor(host);
    const self = this.#classifier.mayGovern(host, port);
    if (names.length === 0) return self ? [host] : NO_HOSTS;
    const governed = names.filter((name) => this.#classifier.mayGovern(name, port));
    return self ? [host, ...governed] : governed;
  }
}

const NO_HOSTS: readonly string[] = Object.freeze([]);

function ungoverned(head: GateRequestHead): HeadRoute {
  return { candidates: NONE, method: head.method, override: null, resolvedHost: null, conflict: null };
}

function conflicting(head: GateRequestHead, first: HeadRoute, second: MethodOverride): HeadRoute {
  const one = `${first.override === null ? 'as sent' : `with ${first.override.source}`}: ${first.method} ${first.candidates[0]!.tool.id}`;
  const two = `with ${second.source}: ${second.method}`;
  return {
    candidates: NONE,
    method: head.method,
    override: null,
    resolvedHost: null,
    conflict: `${one}; ${two}, another governed route`,
  };
}

/** Whether a parsed body carries `_method`: only then can it classify otherwise than the head. */
export function bodyNamesMethod(body: unknown): boolean {
  return (
    body !== null && typeof body === 'object' && !Array.isArray(body) && Object.hasOwn(body, METHOD_PARAM)
  );
}

/** Every override the request carries, headers first, then `?_method`, then a form's `_method`. */
function methodOverrides(head: GateRequestHead, body: unknown): readonly MethodOverride[] {
  // Asked of every request to a governed host: one that names no other method allocates nothing.
  const form = body !== null && typeof body === 'object' && !Array.isArray(body);
  if (!form && !head.query.includes(METHOD_PARAM) && !anyOverrideHeader(head.headers)) return NO_OVERRIDES;
  const out: MethodOverride[] = [];
  for (const name of OVERRIDE_HEADERS) {
    const value = head.headers[name];
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) push(out, v, name);
  }
  if (head.query.includes(METHOD_PARAM)) {
    for (const v of new URLSearchParams(head.query).getAll(METHOD_PARAM)) push(out, v, `?${METHOD_PARAM}`);
  }
  // A form or multipart field to Rails (Rack::MethodOverride), also a JSON member to Laravel.
  if (form) {
    const v = (body as Record<string, unknown>)[METHOD_PARAM];
    for (const item of Array.isArray(v) ? v : [v]) {
      if (typeof item === 'string') push(out, item, `body ${METHOD_PARAM}`);
    }
  }
  return out;
}

function anyOverrideHeader(headers: HeaderMap): boolean {
  for (const name of OVERRIDE_HEADERS) if (headers[name] !== undefined) return true;
  return false;
}

function push(out: MethodOverride[], raw: string, source: string): void {
  // Servers upper-case the value (Rails, method-override); a comma list is one value too many.
  const method = raw.trim().toUpperCase();
  if (TOKEN.test(method)) out.push({ method, source });
}

/**
 * Whether the head announces a body: a length above zero, a transfer coding, or (no length said,
 * as an in-process client's head may be) a Content-Type.
 */
function hasBody(headers: HeaderMap): boolean {
  if (headers['transfer-encoding'] !== undefined) return true;
  const length = headers['content-length'];
  const first = Array.isArray(length) ? length[0] : length;
  if (first === undefined) return headers['content-type'] !== undefined;
  return first.trim() !== '0';
}
