/**
 * The in-process front door (DESIGN.md §1, §5): an undici Dispatcher interceptor that turns each
 * dispatch into the same `GateRequestHead` the forward proxy builds and lets the one engine decide.
 * No verdict logic lives here: ungoverned requests go to the next dispatcher as they are, governed
 * ones are buffered and handed to `GateHandler.handle()`, whose `send` dispatches through the next
 * dispatcher in the chain, and the `GateResponse` is replayed into the caller's handler.
 */
import { STATUS_CODES } from 'node:http';
import { stringify as stringifyQuery } from 'node:querystring';
import type { Dispatcher } from 'undici';
import { checkPositiveInt } from '../config/index.js';
import {
  classifyFailure,
  type GateHandler,
  type GateRequestHead,
  type GateResponse,
  type HeaderMap,
  MAX_CONTEXT_VALUE_LENGTH,
  normalizeHead,
  stripHopByHop,
  type UpstreamRequest,
  type UpstreamResult,
  type UpstreamSender,
} from '../engine/index.js';
import { EffectgateError } from '../errors.js';

export interface GateInterceptorOptions {
  /** Run id for requests without an `Effectgate-Run` header (default: the gate's own run id). */
  readonly run?: string;
  /** Step for requests without an `Effectgate-Step` header. */
  readonly step?: string;
  /** Largest governed request body; default the gate's own limit (`createGate({ maxBodyBytes })`). */
  readonly maxBodyBytes?: number;
  /** Largest governed response body buffered from the upstream; default 8 MiB. */
  readonly maxResponseBytes?: number;
}

type Dispatch = Dispatcher.Dispatch;
type DispatchOptions = Dispatcher.DispatchOptions;
type Handler = Dispatcher.DispatchHandler;

interface Origin {
  readonly scheme: 'http' | 'https';
  readonly host: string;
  readonly port: number;
}

const DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024;
const CONTEXT_PREFIX = 'effectgate-';
const EMPTY = new Uint8Array(0);
// biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point.
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

/**
 * Gates every request dispatched through an undici dispatcher with `gate` (from `createGate`).
 *
 * Ungoverned requests stream through untouched (only `Effectgate-*` headers are removed and the
 * path is normalized, exactly as the proxy does); governed ones get the same verdicts, headers and
 * trail as through the forward proxy. Works with `Agent#compose` and `setGlobalDispatcher`, so a
 * plain `fetch()` is gated too.
 *
 * @example
 * import { createGate } from 'effectgate';
 * import { gateInterceptor } from 'effectgate/undici';
 * import { Agent, setGlobalDispatcher } from 'undici';
 *
 * const gate = await createGate({
 *   policies: './policies',
 *   store: 'pglite:./.effectgate',
 *   scope: { tenant: 'acme', area: 'support', agent: 'triage-bot' },
 * });
 * setGlobalDispatcher(new Agent().compose(gateInterceptor(gate, { run: 'nightly-triage-42' })));
 *
 * const first = await fetch('https://api.github.com/repos/acme/api/issues', {
 *   method: 'POST',
 *   headers: { authorization: `Bearer ${process.env.GITHUB_TOKEN}`, 'content-type': 'application/json' },
 *   body: JSON.stringify({ title: 'Disk full on db-1' }),
 * });
 * console.log(first.status, first.headers.get('effectgate-verdict')); // 201 allow
 * // The same call again, from this run or any other run of the same agent, is not sent:
 * // 409 application/problem+json, effectgate-verdict: duplicate, pointing at the first operation.
 */
export function gateInterceptor(
  gate: GateHandler,
  options: GateInterceptorOptions = {},
): Dispatcher.DispatcherComposeInterceptor {
  const run = options.run === undefined ? null : checkContextValue('run', options.run);
  const step = options.step === undefined ? null : checkContextValue('step', options.step);
  const maxBodyBytes =
    options.maxBodyBytes === undefined ? null : checkPositiveInt('maxBodyBytes', options.maxBodyBytes);
  const maxResponseBytes =
    options.maxResponseBytes === undefined
      ? DEFAULT_MAX_RESPONSE_BYTES
      : checkPositiveInt('maxResponseBytes', options.maxResponseBytes);

  return (dispatch: Dispatch): Dispatch =>
    function gatedDispatch(opts: DispatchOptions, handler: Handler): boolean {
      const origin = parseOrigin(opts.origin);
      // Not an http(s) origin: undici itself will refuse or handle it; nothing the gate can judge.
      if (origin === null) return dispatch(opts, handler);
      const target = opts.query == null ? opts.path : withQuery(opts.path, opts.query);
      sawContextHeader = false;
      const headers = toHeaderMap(opts.headers);
      const head = normalizeHead({
        scheme: origin.scheme,
        method: opts.method,
        host: origin.host,
        port: origin.port,
        pathAndQuery: target,
        headers,
      });
      const decision = gate.route(head);
      if (decision.kind === 'pass') {
        if (!sawContextHeader && samePath(target, head.path)) return dispatch(opts, handler);
        return dispatch(rewritten(opts, head, headers), handler);
      }
      if (decision.kind === 'refuse') {
        replay(handler, decision.response, opts.method);
        return true;
      }
      const limit = maxBodyBytes ?? decision.maxBodyBytes;
      const ctx = head.context;
      const governedHead =
        (run !== null && ctx.run === null) || (step !== null && ctx.step === null)
          ? { ...head, context: { ...ctx, run: ctx.run ?? run, step: ctx.step ?? step } }
          : head;
      governed(gate, dispatch, opts, governedHead, limit, maxResponseBytes).then(
        (response) => replay(handler, response, opts.method),
        (err: unknown) => fail(handler, err),
      );
      return true;
    };
}

async function governed(
  gate: GateHandler,
  dispatch: Dispatch,
  opts: DispatchOptions,
  head: GateRequestHead,
  limit: number,
  maxResponseBytes: number,
): Promise<GateResponse> {
  if (opts.upgrade != null && opts.upgrade !== false) {
    return gate.refuse(
      head,
      'bad_request',
      'An upgrade request to a governed route cannot be gated; refused.',
    );
  }
  const declared = Number(head.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) {
    return gate.refuse(
      head,
      'body_too_large',
      `The request body declares ${declared} bytes; the limit is ${limit}.`,
    );
  }
  const body = await readBody(opts.body, limit);
  if (body === null) {
    return gate.refuse(
      head,
      'body_too_large',
      `The request body is longer than the limit of ${limit} bytes.`,
    );
  }
  const send = createSender(dispatch, opts, maxResponseBytes);
  return gate.handle({ ...head, body }, send);
}

// ---------------------------------------------------------------------------------------------
// Request head translation (runs on every request: keep it allocation-light).

const origins = new Map<string, Origin | null>();
const MAX_CACHED_ORIGINS = 1024;

function parseOrigin(origin: string | URL | undefined): Origin | null {
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
      parsed = { scheme, host: url.hostname, port };
    }
  } catch {
    parsed = null;
  }
  if (origins.size >= MAX_CACHED_ORIGINS) origins.clear();
  origins.set(key, parsed);
  return parsed;
}

function withQuery(path: string, query: Record<string, unknown>): string {
  // As undici's own `serializePathWithQuery` (node:querystring).
  const serialized = stringifyQuery(query as Parameters<typeof stringifyQuery>[0]);
  return serialized === '' ? path : `${path}?${serialized}`;
}

/** Set by `toHeaderMap`: the request carried an `Effectgate-*` header (to be stripped). */
let sawContextHeader = false;

type HeaderValue = string | string[] | number | Buffer | readonly (string | Buffer)[] | null | undefined;

/**
 * undici accepts headers as an object, a flat `[name, value, …]` array, or an iterable of pairs
 * (an array of pairs, a `Map`, a `Headers`); the engine wants lower-case names with string values.
 */
function toHeaderMap(headers: DispatchOptions['headers']): HeaderMap {
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

function add(map: HeaderMap, rawName: string | Buffer, rawValue: HeaderValue): void {
  if (rawValue == null) return;
  const name = (typeof rawName === 'string' ? rawName : rawName.toString('latin1')).toLowerCase();
  if (name.startsWith(CONTEXT_PREFIX)) sawContextHeader = true;
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
function samePath(target: string, path: string): boolean {
  if (!target.startsWith(path)) return false;
  if (target.length === path.length) return true;
  const next = target.charCodeAt(path.length);
  return next === 0x3f /* ? */ || next === 0x23; /* # */
}

/**
 * An ungoverned request that needs a copy: the normalized path (what was classified is what is
 * sent, DESIGN.md §4.2) and no `Effectgate-*` headers. Every other header is the caller's own.
 */
function rewritten(opts: DispatchOptions, head: GateRequestHead, headers: HeaderMap): DispatchOptions {
  const out: Record<string, string | string[]> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined && !name.startsWith(CONTEXT_PREFIX)) out[name] = value;
  }
  const path = head.query === '' ? head.path : `${head.path}?${head.query}`;
  return { ...opts, path, query: undefined, headers: out } as DispatchOptions;
}

function checkContextValue(name: string, value: unknown): string {
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
async function readBody(body: unknown, limit: number): Promise<Uint8Array | null> {
  if (body == null) return EMPTY;
  if (typeof body === 'string') {
    const bytes = Buffer.from(body);
    return bytes.byteLength > limit ? null : bytes;
  }
  if (body instanceof Uint8Array) return body.byteLength > limit ? null : body;
  if (ArrayBuffer.isView(body)) {
    return body.byteLength > limit ? null : new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
  }
  if (body instanceof ArrayBuffer) return body.byteLength > limit ? null : new Uint8Array(body);
  if (isBlobLike(body)) {
    return body.size > limit ? null : new Uint8Array(await body.arrayBuffer());
  }
  if (typeof (body as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function') {
    const chunks: Buffer[] = [];
    let size = 0;
    // Leaving the loop early calls the iterator's `return()`, which destroys a Readable.
    for await (const chunk of body as AsyncIterable<unknown>) {
      const bytes = toBuffer(chunk);
      size += bytes.byteLength;
      if (size > limit) return null;
      chunks.push(bytes);
    }
    return Buffer.concat(chunks, size);
  }
  throw new EffectgateError('EG_ERR_CONFIG_INVALID', 'Unsupported request body type for a governed request.');
}

function isBlobLike(body: unknown): body is Blob {
  return (
    typeof body === 'object' &&
    body !== null &&
    typeof (body as Blob).arrayBuffer === 'function' &&
    typeof (body as Blob).size === 'number'
  );
}

function toBuffer(chunk: unknown): Buffer {
  if (Buffer.isBuffer(chunk)) return chunk;
  if (typeof chunk === 'string') return Buffer.from(chunk);
  if (ArrayBuffer.isView(chunk)) return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (chunk instanceof ArrayBuffer) return Buffer.from(chunk);
  throw new EffectgateError('EG_ERR_CONFIG_INVALID', 'Unsupported chunk in a governed request body.');
}

// ---------------------------------------------------------------------------------------------
// Upstream dispatch for `Gate.handle()`, through the next dispatcher in the chain.

class ResponseTooLargeError extends Error {
  readonly code = 'response_too_large';
}

class DeadlineExceededError extends Error {
  readonly code = 'deadline_exceeded';
}

/**
 * A sender like the proxy's upstream client (`src/proxy/upstream-client.ts`): complete body in,
 * complete response out, never a throw; `not_sent` only when undici never reached
 * `onRequestStart` (it fires just before the first byte is written) and the error can only happen
 * before a request is written (`classifyFailure`).
 */
function createSender(dispatch: Dispatch, opts: DispatchOptions, limit: number): UpstreamSender {
  return (request: UpstreamRequest) =>
    new Promise<UpstreamResult>((resolve) => {
      let started = false;
      let expired = false;
      let settled = false;
      let controller: Dispatcher.DispatchController | null = null;
      let status = 0;
      let headers: Record<string, string | string[]> = {};
      const chunks: Buffer[] = [];
      let size = 0;
      let deadline: NodeJS.Timeout | undefined;
      const settle = (result: UpstreamResult): void => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        resolve(result);
      };
      if (request.deadlineMs !== undefined) {
        deadline = setTimeout(
          () => {
            expired = true;
            settle({
              kind: 'failure',
              dispatchState: started ? 'sent_no_response' : 'not_sent',
              timedOut: true,
              error: 'deadline_exceeded',
            });
            controller?.abort(new DeadlineExceededError());
          },
          Math.max(0, request.deadlineMs),
        );
      }
      const handler: Handler = {
        onRequestStart: (c) => {
          controller = c;
          if (expired) {
            c.abort(new DeadlineExceededError());
            return;
          }
          started = true;
        },
        onResponseStart: (c, statusCode, responseHeaders) => {
          if (statusCode < 200) return;
          status = statusCode;
          headers = stripHopByHop(responseHeaders);
          const declared = Number(responseHeaders['content-length']);
          if (Number.isFinite(declared) && declared > limit) c.abort(new ResponseTooLargeError());
        },
        onResponseData: (c, chunk) => {
          size += chunk.length;
          if (size > limit) {
            c.abort(new ResponseTooLargeError());
            return;
          }
          chunks.push(chunk);
        },
        onResponseEnd: () => {
          settle({ kind: 'response', status, headers, body: Buffer.concat(chunks, size) });
        },
        onResponseError: (_c, err) => {
          if (err instanceof ResponseTooLargeError) {
            settle({ kind: 'failure', dispatchState: 'sent_no_response', timedOut: false, error: err.code });
            return;
          }
          settle(classifyFailure(err, started));
        },
      };
      const body = Buffer.from(request.body.buffer, request.body.byteOffset, request.body.byteLength);
      const out: Record<string, string | string[]> = { ...request.headers };
      delete out['expect'];
      out['content-length'] = String(body.byteLength);
      try {
        dispatch(
          {
            origin: `${request.scheme}://${authority(request.host, request.port)}`,
            path: request.pathAndQuery,
            method: request.method as Dispatcher.HttpMethod,
            headers: out,
            body: body.byteLength > 0 ? body : null,
            headersTimeout: opts.headersTimeout,
            bodyTimeout: opts.bodyTimeout,
          },
          handler,
        );
      } catch (err) {
        settle(classifyFailure(err, started));
      }
    });
}

function authority(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

// ---------------------------------------------------------------------------------------------
// Answering the caller's handler without an upstream.

/**
 * Plays a complete `GateResponse` into a dispatch handler: request start, response head, body,
 * end; honours `pause()`/`resume()` and `abort()` as undici's own controller does.
 */
class ReplayController implements Dispatcher.DispatchController {
  readonly #handler: Handler;
  readonly #response: GateResponse;
  readonly #withBody: boolean;
  #step = 0;
  #paused = false;
  #aborted = false;
  #done = false;
  #reason: Error | null = null;

  constructor(handler: Handler, response: GateResponse, withBody: boolean) {
    this.#handler = handler;
    this.#response = response;
    this.#withBody = withBody;
  }

  get aborted(): boolean {
    return this.#aborted;
  }

  get paused(): boolean {
    return this.#paused;
  }

  get reason(): Error | null {
    return this.#reason;
  }

  pause(): void {
    this.#paused = true;
  }

  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    queueMicrotask(() => this.run());
  }

  abort(reason: Error): void {
    if (this.#aborted || this.#done) return;
    this.#aborted = true;
    this.#done = true;
    this.#reason = reason;
    try {
      this.#handler.onResponseError?.(this, reason);
    } catch {
      // Nothing is left to tell.
    }
  }

  run(): void {
    while (!this.#paused && !this.#done) {
      try {
        this.#next();
      } catch (err) {
        this.abort(err instanceof Error ? err : new Error(String(err)));
      }
    }
  }

  #next(): void {
    const h = this.#handler;
    const r = this.#response;
    switch (this.#step++) {
      case 0:
        h.onRequestStart?.(this, {});
        return;
      case 1: {
        const headers: Record<string, string | string[]> = { ...r.headers };
        if (this.#withBody) headers['content-length'] = String(r.body.byteLength);
        h.onResponseStart?.(this, r.status, headers, STATUS_CODES[r.status] ?? '');
        return;
      }
      case 2:
        if (this.#withBody && r.body.byteLength > 0) {
          h.onResponseData?.(this, Buffer.from(r.body.buffer, r.body.byteOffset, r.body.byteLength));
        }
        return;
      default:
        this.#done = true;
        h.onResponseEnd?.(this, {});
    }
  }
}

function replay(handler: Handler, response: GateResponse, method: string): void {
  const controller = new ReplayController(newStyle(handler), response, method.toUpperCase() !== 'HEAD');
  queueMicrotask(() => controller.run());
}

/** Only an engine bug or a failing request body source gets here. */
function fail(handler: Handler, err: unknown): void {
  const controller = new ReplayController(
    newStyle(handler),
    { status: 500, headers: {}, body: EMPTY },
    false,
  );
  controller.abort(err instanceof Error ? err : new Error(String(err)));
}

/**
 * `compose()` always hands interceptors a new-style handler (undici's `WrapHandler`); a legacy one
 * (`onConnect`/`onHeaders`/`onData`/`onComplete`/`onError`) arrives only when the interceptor is
 * called by hand, and is adapted the way `WrapHandler` does.
 */
function newStyle(handler: Handler): Handler {
  if (typeof handler.onRequestStart === 'function') return handler;
  const legacy = handler as Handler & {
    onConnect?: (abort: (reason?: Error) => void, context?: object) => void;
    onHeaders?: (status: number, raw: Buffer[], resume: () => void, message: string) => boolean | undefined;
    onData?: (chunk: Buffer) => boolean | undefined;
    onComplete?: (trailers: Buffer[]) => void;
    onError?: (err: Error) => void;
  };
  return {
    onRequestStart: (c, context) =>
      legacy.onConnect?.((reason) => c.abort(reason ?? new Error('aborted')), context),
    onResponseStart: (c, status, headers, message) => {
      const raw: Buffer[] = [];
      for (const [name, value] of Object.entries(headers)) {
        if (value === undefined) continue;
        for (const v of Array.isArray(value) ? value : [value])
          raw.push(Buffer.from(name), Buffer.from(v, 'latin1'));
      }
      if (legacy.onHeaders?.(status, raw, () => c.resume(), message ?? '') === false) c.pause();
    },
    onResponseData: (c, chunk) => {
      if (legacy.onData?.(chunk) === false) c.pause();
    },
    onResponseEnd: () => legacy.onComplete?.([]),
    onResponseError: (_c, err) => legacy.onError?.(err),
  };
}
