/**
 * Tracing is decided from the standard OTEL_* variables, once. Off (no endpoint, disabled, or an
 * exporter other than otlp) means the no-op tracer, which allocates nothing per request, and the
 * OpenTelemetry implementation module is never imported. The probe below only records whether
 * otel-tracer.ts gets imported; the module itself is the real one.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { noGateTracer, tracerFromEnv, tracingFromEnv } from '../../../src/engine/index.js';
import type { GateResponse, UpstreamRequest, UpstreamResult } from '../../../src/engine/types.js';

const probe = vi.hoisted(() => ({ imports: 0 }));
vi.mock('../../../src/engine/otel-tracer.js', async (original) => {
  probe.imports += 1;
  return original();
});

const ENDPOINT = 'http://127.0.0.1:4318';

describe('tracingFromEnv', () => {
  it('is off without an endpoint, whatever else is set', () => {
    expect(tracingFromEnv({})).toEqual({
      on: false,
      why: expect.stringContaining('OTEL_EXPORTER_OTLP_ENDPOINT'),
    });
    expect(tracingFromEnv({ OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' }).on).toBe(false);
    expect(tracingFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: '' }).on).toBe(false);
  });

  it('is off when disabled or when the exporter is not otlp, even with an endpoint', () => {
    expect(tracingFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, OTEL_SDK_DISABLED: 'TRUE' }).on).toBe(
      false,
    );
    expect(tracingFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, OTEL_TRACES_EXPORTER: 'none' }).on).toBe(
      false,
    );
    expect(
      tracingFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, OTEL_TRACES_EXPORTER: 'otlp,none' }).on,
    ).toBe(false);
    expect(tracingFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, OTEL_TRACES_EXPORTER: 'zipkin' })).toEqual(
      {
        on: false,
        why: expect.stringContaining('exports only otlp'),
      },
    );
    expect(tracingFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, OTEL_SDK_DISABLED: 'false' }).on).toBe(
      true,
    );
  });

  it('posts to the traces endpoint as given, else to the base endpoint’s v1/traces', () => {
    const url = (env: NodeJS.ProcessEnv): string | null => {
      const s = tracingFromEnv(env);
      return s.on ? s.url : null;
    };
    expect(url({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT })).toBe(`${ENDPOINT}/v1/traces`);
    expect(url({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/otlp' })).toBe('http://c:4318/otlp/v1/traces');
    expect(url({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/otlp/' })).toBe('http://c:4318/otlp/v1/traces');
    expect(
      url({
        OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT,
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://t.example/in',
      }),
    ).toBe('https://t.example/in');
  });

  it('refuses an endpoint that is not an http(s) URL, naming the variable', () => {
    expect(() => tracingFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' })).toThrow(
      /OTEL_EXPORTER_OTLP_ENDPOINT must be an http:\/\/ or https:\/\/ URL/,
    );
    expect(() => tracingFromEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'not a url' })).toThrow(
      /OTEL_EXPORTER_OTLP_TRACES_ENDPOINT/,
    );
  });

  it('reads the sampler and batch knobs, warning and keeping the default for a bad one', () => {
    const s = tracingFromEnv({
      OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT,
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.25',
      OTEL_BSP_SCHEDULE_DELAY: '100',
      OTEL_BSP_MAX_QUEUE_SIZE: 'lots',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
    });
    expect(s.on).toBe(true);
    if (!s.on) return;
    expect(s.sampler).toEqual({ kind: 'traceidratio', parentBased: true, ratio: 0.25 });
    expect(s.batch).toEqual({
      scheduledDelayMillis: 100,
      maxQueueSize: 2048,
      maxExportBatchSize: 512,
      exportTimeoutMillis: 30_000,
    });
    expect(s.warnings).toEqual([
      'OTEL_EXPORTER_OTLP_PROTOCOL=grpc: effectgate sends http/json',
      'OTEL_BSP_MAX_QUEUE_SIZE=lots is not a positive integer; using 2048',
    ]);
    const unknown = tracingFromEnv({
      OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT,
      OTEL_TRACES_SAMPLER: 'sometimes',
    });
    expect(unknown.on && unknown.sampler).toEqual({ kind: 'always_on', parentBased: true, ratio: 1 });
  });
});

describe('tracerFromEnv', () => {
  afterEach(() => {
    probe.imports = 0;
  });

  it('with no OTEL_* set is the no-op tracer, and never imports the OpenTelemetry module', async () => {
    expect(await tracerFromEnv({ env: {} })).toBe(noGateTracer);
    expect(
      await tracerFromEnv({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, OTEL_SDK_DISABLED: 'true' } }),
    ).toBe(noGateTracer);
    expect(probe.imports).toBe(0);
  });

  it('imports it when an endpoint is named (the probe can see an import)', async () => {
    const tracer = await tracerFromEnv({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT } });
    expect(tracer).not.toBe(noGateTracer);
    expect(probe.imports).toBe(1);
    await tracer.close();
  });
});

describe('noGateTracer', () => {
  it('hands back the very request, promise and response: no copy, no span, no allocation per call', async () => {
    const upstream = { headers: { traceparent: '00-agent' } } as unknown as UpstreamRequest;
    const sent: UpstreamResult = { kind: 'response', status: 201, headers: {}, body: new Uint8Array(0) };
    const promise = Promise.resolve(sent);
    let given: UpstreamRequest | null = null;
    const send = (r: UpstreamRequest): Promise<UpstreamResult> => {
      given = r;
      return promise;
    };
    const a = noGateTracer.decision({} as never, {} as never, 0);
    const b = noGateTracer.decision({} as never, {} as never, 0);
    expect(a).toBe(b);
    expect(Object.isFrozen(a)).toBe(true);
    expect(a.attempt({} as never, upstream, send)).toBe(promise);
    expect(given).toBe(upstream);
    const response: GateResponse = { status: 201, headers: {}, body: new Uint8Array(0) };
    expect(a.end(response)).toBe(response);
    await expect(noGateTracer.close()).resolves.toBeUndefined();
  });
});
