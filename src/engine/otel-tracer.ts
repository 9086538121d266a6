/*
 * The OpenTelemetry implementation of GateTracer. Only `tracerFromEnv` imports this file, and only
 * when tracing is configured: every OpenTelemetry package is loaded from here, never by the rest
 * of the engine, so an unconfigured gate pays nothing for them.
 *
 * Nothing global is registered (no global tracer provider, propagator or context manager): the
 * gate's spans are parented explicitly, so a process embedding the gate keeps its own setup.
 */

import {
  type Attributes,
  type Context,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  type TextMapSetter,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import {
  defaultResource,
  detectResources,
  envDetector,
  resourceFromAttributes,
} from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { effectgateVersion } from '../effectgate-version.js';
import type { OutcomeInput } from '../store/index.js';
import type { GateLogger } from './gate.js';
import type { DecisionTrace, GateTracer, TracedAttempt } from './gate-tracing.js';
import { LoggedExporter } from './logged-exporter.js';
import type { Proposal } from './proposal.js';
import type { BatchSetting, SamplerSetting } from './tracer-from-env.js';
import type {
  GateRequestHead,
  GateResponse,
  HeaderMap,
  UpstreamRequest,
  UpstreamResult,
  UpstreamSender,
} from './types.js';

export interface OtelTracerSettings {
  /** The OTLP/HTTP traces URL (JSON is POSTed there). */
  readonly url: string;
  readonly sampler: SamplerSetting;
  readonly batch: BatchSetting;
  readonly logger: GateLogger;
  /** How long `close()` waits for the last export (default 5 s): a dead collector never holds a stop. */
  readonly closeTimeoutMs?: number;
}

/** Builds the tracer provider, its batch processor and the OTLP/HTTP JSON exporter. */
export function createOtelTracer(settings: OtelTracerSettings): GateTracer {
  const exporter = new LoggedExporter(new OTLPTraceExporter({ url: settings.url }), settings.logger);
  const version = effectgateVersion();
  const ours = resourceFromAttributes({ 'service.name': 'effectgate', 'service.version': version });
  const provider = new TracerProvider({
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (the env detector) win over the defaults.
    resource: defaultResource()
      .merge(ours)
      .merge(detectResources({ detectors: [envDetector] })),
    sampler: samplerOf(settings.sampler),
    spanProcessors: [new BatchSpanProcessor({ exporter, ...settings.batch })],
  });
  return new OtelGateTracer(
    provider,
    provider.getTracer('effectgate', version),
    settings.closeTimeoutMs ?? CLOSE_TIMEOUT_MS,
  );
}

const CLOSE_TIMEOUT_MS = 5_000;

const propagator = new W3CTraceContextPropagator();

/** Reads the agent's `traceparent` / `tracestate` from a request's end-to-end headers. */
const headerGetter: TextMapGetter<HeaderMap> = {
  get: (headers, key) => headers[key],
  keys: (headers) => Object.keys(headers),
};

const headerSetter: TextMapSetter<Record<string, string | string[]>> = {
  set: (headers, key, value) => {
    headers[key] = value;
  },
};

class OtelGateTracer implements GateTracer {
  readonly #provider: TracerProvider;
  readonly #tracer: Tracer;
  readonly #closeTimeoutMs: number;
  #closing: Promise<void> | null = null;

  constructor(provider: TracerProvider, tracer: Tracer, closeTimeoutMs: number) {
    this.#provider = provider;
    this.#tracer = tracer;
    this.#closeTimeoutMs = closeTimeoutMs;
  }

  decision(request: GateRequestHead, proposal: Proposal, startedAt: number): DecisionTrace {
    // An absent or malformed traceparent leaves the root context: the decision starts a trace.
    const parent = propagator.extract(ROOT_CONTEXT, request.headers, headerGetter);
    const tool = proposal.tool;
    const span = this.#tracer.startSpan(
      `execute_tool ${tool.id}`,
      {
        kind: SpanKind.INTERNAL,
        startTime: startedAt,
        attributes: {
          'gen_ai.operation.name': 'execute_tool',
          'gen_ai.tool.name': tool.id,
          'effectgate.tool.effect': tool.effect,
          'effectgate.run.id': proposal.common.runId,
        },
      },
      parent,
    );
    return new OtelDecision(this.#tracer, span, trace.setSpan(parent, span), proposal);
  }

  close(): Promise<void> {
    this.#closing ??= new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, this.#closeTimeoutMs);
      timer.unref();
      this.#provider
        .shutdown()
        .catch(() => undefined)
        .finally(() => {
          clearTimeout(timer);
          resolve();
        });
    });
    return this.#closing;
  }
}

/**
 * One decision's span and its attempt's CLIENT child. Attributes are ids, closed sets, the tool id,
 * the destination's host, port and the path as the trail keeps it (secret captures redacted):
 * never a body, a query string, a header value or a credential.
 */
class OtelDecision implements DecisionTrace {
  readonly #tracer: Tracer;
  readonly #span: Span;
  /** The decision span's context: the attempt's parent. */
  readonly #context: Context;
  readonly #proposal: Proposal;
  #attempt: Span | null = null;
  #ended = false;

  constructor(tracer: Tracer, span: Span, context: Context, proposal: Proposal) {
    this.#tracer = tracer;
    this.#span = span;
    this.#context = context;
    this.#proposal = proposal;
  }

  attempt(allow: TracedAttempt, upstream: UpstreamRequest, send: UpstreamSender): Promise<UpstreamResult> {
    this.#span.setAttributes(attemptAttributes(allow));
    const span = this.#clientSpan(upstream, attemptAttributes(allow));
    this.#attempt = span;
    return this.#sendIn(span, upstream, send);
  }

  async dispatch(upstream: UpstreamRequest, send: UpstreamSender): Promise<UpstreamResult> {
    // Shadow mode: not an attempt (no operation owns it), but a request at the destination all the
    // same, so it has its span and the destination is parented on it, as an attempt's would be.
    const span = this.#clientSpan(upstream, { 'effectgate.mode': 'shadow' });
    const sent = await this.#sendIn(span, upstream, send);
    span.setAttribute(
      'effectgate.dispatch_state',
      sent.kind === 'failure' ? sent.dispatchState : 'response_received',
    );
    if (sent.kind === 'failure') span.setStatus({ code: SpanStatusCode.ERROR, message: sent.dispatchState });
    span.end();
    return sent;
  }

  /** A CLIENT span for one request to the destination, child of the decision. */
  #clientSpan(upstream: UpstreamRequest, attributes: Attributes): Span {
    const recorded = this.#proposal.common.request;
    return this.#tracer.startSpan(
      upstream.method,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          'http.request.method': upstream.method,
          'server.address': upstream.host,
          'server.port': upstream.port,
          'url.scheme': upstream.scheme,
          // The trail's path: no query string, secret path captures as `{name}`.
          'url.path': recorded.path,
          ...attributes,
        },
      },
      this.#context,
    );
  }

  /** Sends `upstream` with `span` as the destination's parent (not the agent's span, nor its tracestate). */
  #sendIn(span: Span, upstream: UpstreamRequest, send: UpstreamSender): Promise<UpstreamResult> {
    const headers = { ...upstream.headers };
    delete headers['traceparent'];
    delete headers['tracestate'];
    propagator.inject(trace.setSpan(ROOT_CONTEXT, span), headers, headerSetter);
    return send({ ...upstream, headers }).then((sent) => {
      if (sent.kind === 'failure') {
        span.setAttribute('error.type', sent.timedOut ? 'timeout' : sent.error);
      } else {
        span.setAttribute('http.response.status_code', sent.status);
      }
      return sent;
    });
  }

  settled(outcome: OutcomeInput): void {
    const span = this.#attempt;
    if (span === null) return;
    this.#attempt = null;
    span.setAttributes({
      'effectgate.dispatch_state': outcome.dispatchState,
      'effectgate.operation_state': outcome.operationState,
    });
    if (outcome.operationState === 'failed' || outcome.operationState === 'unknown') {
      span.setStatus({
        code: SpanStatusCode.ERROR,
        message: `${outcome.dispatchState}, operation ${outcome.operationState}`,
      });
    }
    span.end();
  }

  end(response: GateResponse): GateResponse {
    if (this.#ended) return response;
    this.#ended = true;
    const verdict = header(response, 'effectgate-verdict');
    const attributes: Attributes = { 'effectgate.verdict': verdict ?? 'none' };
    const decision = header(response, 'effectgate-decision');
    if (decision !== undefined) attributes['effectgate.decision.id'] = decision;
    // Absent when the agent may not learn it (the verdict headers decide, gate-headers.ts).
    const operation = header(response, 'effectgate-operation');
    if (operation !== undefined) attributes['effectgate.operation.id'] = operation;
    const attempt = header(response, 'effectgate-attempt');
    if (attempt !== undefined) attributes['effectgate.attempt.id'] = attempt;
    this.#span.setAttributes(attributes);
    if (verdict === undefined) this.#span.setStatus({ code: SpanStatusCode.ERROR, message: 'no verdict' });
    // A streamed answer's attempt ends with its outcome (settled), after this answer's head.
    if (response.stream === undefined) this.#endAttempt('no outcome recorded');
    this.#span.end();
    return response;
  }

  fail(err: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    const type = errorType(err);
    this.#span.setAttribute('error.type', type);
    this.#span.setStatus({ code: SpanStatusCode.ERROR, message: type });
    this.#endAttempt(type);
    this.#span.end();
  }

  #endAttempt(why: string): void {
    const span = this.#attempt;
    if (span === null) return;
    this.#attempt = null;
    span.setStatus({ code: SpanStatusCode.ERROR, message: why });
    span.end();
  }
}

function attemptAttributes(allow: TracedAttempt): Attributes {
  const a: Attributes = {
    'effectgate.attempt.id': allow.attemptId,
    'effectgate.attempt.number': allow.attemptNumber,
  };
  if (allow.retryReason !== null) a['effectgate.retry.reason'] = allow.retryReason;
  if (allow.retryOfAttemptId !== null) a['effectgate.retry.of_attempt_id'] = allow.retryOfAttemptId;
  return a;
}

function header(response: GateResponse, name: string): string | undefined {
  const v = response.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** A stable, secret-free name for a failure: its code (EG_ERR_…), else its class (never its message). */
function errorType(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string') return code;
  return err instanceof Error ? err.name : 'unknown';
}

function samplerOf(s: SamplerSetting): Sampler {
  const root =
    s.kind === 'always_on'
      ? new AlwaysOnSampler()
      : s.kind === 'always_off'
        ? new AlwaysOffSampler()
        : new TraceIdRatioBasedSampler(s.ratio);
  return s.parentBased ? new ParentBasedSampler({ root }) : root;
}
