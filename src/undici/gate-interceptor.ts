import type { Dispatcher } from 'undici';
import { checkPositiveInt } from '../config/index.js';
import { type GateHandler, type GateRequestHead, type GateResponse, normalizeHead } from '../engine/index.js';
import { readBody } from './dispatch-body.js';
import {
  checkContextValue,
  hasContextHeader,
  parseOrigin,
  rewritten,
  samePath,
  toHeaderMap,
  withQuery,
} from './dispatch-head.js';
import { GateNamespaceHandler } from './gate-namespace-handler.js';
import { createSender } from './next-dispatcher-sender.js';
import { fail, replay } from './replay-response.js';

export interface GateInterceptorOptions {
  /** Run id for requests without an `Effectgate-Run` header (default: the gate's `runId`, else one derived per scope with an idle bound; never `auto-…`). */
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

const DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024;

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
        const passed = new GateNamespaceHandler(handler);
        if (!hasContextHeader(headers) && samePath(target, head.path)) return dispatch(opts, passed);
        return dispatch(rewritten(opts, head, headers), passed);
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
