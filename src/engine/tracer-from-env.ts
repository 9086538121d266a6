import { EffectgateError } from '../errors.js';
import type { GateLogger } from './gate.js';
import { type GateTracer, noGateTracer } from './gate-tracing.js';

/** Which spans are kept (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`). */
export interface SamplerSetting {
  readonly kind: 'always_on' | 'always_off' | 'traceidratio';
  /** Follow the agent's sampled flag when it sends a `traceparent` (the `parentbased_*` samplers). */
  readonly parentBased: boolean;
  /** For `traceidratio`: the share of traces kept, 0 to 1. */
  readonly ratio: number;
}

/** The batch span processor's knobs (`OTEL_BSP_*`); the SDK itself reads none of them. */
export interface BatchSetting {
  readonly scheduledDelayMillis: number;
  readonly maxQueueSize: number;
  readonly maxExportBatchSize: number;
  readonly exportTimeoutMillis: number;
}

/** What the environment asks for, checked once: off (and why), or the OTLP/HTTP export to make. */
export type TracingSettings =
  | { readonly on: false; readonly why: string }
  | {
      readonly on: true;
      /** Where spans are POSTed (OTLP/HTTP JSON): the traces endpoint as given, else the base + `/v1/traces`. */
      readonly url: string;
      readonly sampler: SamplerSetting;
      readonly batch: BatchSetting;
      /** Variables that were set but could not be used (each also got its default). */
      readonly warnings: readonly string[];
    };

/** The defaults of the OpenTelemetry specification (environment variables, batch span processor). */
const BATCH_DEFAULTS: BatchSetting = Object.freeze({
  scheduledDelayMillis: 5_000,
  maxQueueSize: 2_048,
  maxExportBatchSize: 512,
  exportTimeoutMillis: 30_000,
});

const BATCH_VARIABLES: readonly (readonly [keyof BatchSetting, string])[] = [
  ['scheduledDelayMillis', 'OTEL_BSP_SCHEDULE_DELAY'],
  ['maxQueueSize', 'OTEL_BSP_MAX_QUEUE_SIZE'],
  ['maxExportBatchSize', 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE'],
  ['exportTimeoutMillis', 'OTEL_BSP_EXPORT_TIMEOUT'],
];

/**
 * Reads the standard `OTEL_*` variables. Tracing is on only when an OTLP endpoint is named
 * (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`), and off whatever else is
 * set when `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER` does not name `otlp` (`none`, or an
 * exporter this gate does not ship). Malformed optional knobs warn and keep their default, as the
 * specification asks; an endpoint that is not an http(s) URL is refused, naming the variable.
 */
export function tracingFromEnv(env: NodeJS.ProcessEnv): TracingSettings {
  if (value(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return off('OTEL_SDK_DISABLED=true');
  const warnings: string[] = [];
  const exporters = (value(env, 'OTEL_TRACES_EXPORTER') ?? 'otlp')
    .split(',')
    .map((e) => e.trim().toLowerCase())
    .filter((e) => e !== '');
  if (exporters.includes('none')) return off('OTEL_TRACES_EXPORTER=none');
  if (!exporters.includes('otlp')) {
    return off(`OTEL_TRACES_EXPORTER=${exporters.join(',')}: effectgate exports only otlp (OTLP/HTTP JSON)`);
  }
  if (exporters.length > 1) {
    warnings.push(
      `OTEL_TRACES_EXPORTER: only otlp is exported, not ${exporters.filter((e) => e !== 'otlp')}`,
    );
  }
  const url = endpointOf(env);
  if (url === null) return off('no OTEL_EXPORTER_OTLP_ENDPOINT nor OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const protocol =
    value(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ?? value(env, 'OTEL_EXPORTER_OTLP_PROTOCOL');
  if (protocol !== undefined && protocol !== 'http/json') {
    warnings.push(`OTEL_EXPORTER_OTLP_PROTOCOL=${protocol}: effectgate sends http/json`);
  }
  const batch: Record<keyof BatchSetting, number> = { ...BATCH_DEFAULTS };
  for (const [field, name] of BATCH_VARIABLES) {
    const given = value(env, name);
    if (given === undefined) continue;
    const n = Number(given);
    if (Number.isInteger(n) && n > 0) batch[field] = n;
    else warnings.push(`${name}=${given} is not a positive integer; using ${BATCH_DEFAULTS[field]}`);
  }
  if (batch.maxExportBatchSize > batch.maxQueueSize) batch.maxExportBatchSize = batch.maxQueueSize;
  return Object.freeze({
    on: true,
    url,
    sampler: samplerOf(env, warnings),
    batch: Object.freeze(batch),
    warnings: Object.freeze(warnings),
  });
}

/**
 * The gate's tracer as the environment configures it: {@link noGateTracer} when tracing is off,
 * else an OpenTelemetry one exporting OTLP/HTTP JSON. The SDK and the exporter are imported here,
 * only when on, so an unconfigured gate never loads them. The exporter reads its own variables
 * (`OTEL_EXPORTER_OTLP_HEADERS`, `…_TIMEOUT`, `…_CERTIFICATE`, `…_COMPRESSION`) and the resource
 * `OTEL_SERVICE_NAME` (default `effectgate`) and `OTEL_RESOURCE_ATTRIBUTES` from `process.env`.
 */
export async function tracerFromEnv(
  options: { readonly env?: NodeJS.ProcessEnv; readonly logger?: GateLogger } = {},
): Promise<GateTracer> {
  const settings = tracingFromEnv(options.env ?? process.env);
  if (!settings.on) return noGateTracer;
  const logger = options.logger ?? SILENT;
  for (const warning of settings.warnings) logger.warn({}, warning);
  const { createOtelTracer } = await import('./otel-tracer.js');
  logger.info({ url: settings.url }, 'exporting traces (OpenTelemetry, OTLP/HTTP JSON)');
  return createOtelTracer({ ...settings, logger });
}

const SILENT: GateLogger = { info() {}, warn() {}, error() {} };

function off(why: string): TracingSettings {
  return Object.freeze({ on: false, why });
}

/** A variable's value; an empty one counts as unset (as the specification says). */
function value(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const v = env[name]?.trim();
  return v === undefined || v === '' ? undefined : v;
}

/** The traces URL: the signal's own endpoint as given, else the base endpoint + `v1/traces`. */
function endpointOf(env: NodeJS.ProcessEnv): string | null {
  const traces = value(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  if (traces !== undefined) return checkUrl('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', traces).href;
  const base = value(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  if (base === undefined) return null;
  // As the specification says: the path is appended, so `http://c:4318/otlp` → `…/otlp/v1/traces`.
  const href = checkUrl('OTEL_EXPORTER_OTLP_ENDPOINT', base).href;
  return `${href}${href.endsWith('/') ? '' : '/'}v1/traces`;
}

function checkUrl(name: string, given: string): URL {
  let url: URL | null = null;
  try {
    url = new URL(given);
  } catch {
    url = null;
  }
  if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw new EffectgateError(
      'EG_ERR_CONFIG_INVALID',
      `${name} must be an http:// or https:// URL (an OTLP/HTTP collector); got ${JSON.stringify(given)}`,
    );
  }
  return url;
}

const SAMPLERS: Readonly<Record<string, Omit<SamplerSetting, 'ratio'>>> = {
  always_on: { kind: 'always_on', parentBased: false },
  always_off: { kind: 'always_off', parentBased: false },
  traceidratio: { kind: 'traceidratio', parentBased: false },
  parentbased_always_on: { kind: 'always_on', parentBased: true },
  parentbased_always_off: { kind: 'always_off', parentBased: true },
  parentbased_traceidratio: { kind: 'traceidratio', parentBased: true },
};

function samplerOf(env: NodeJS.ProcessEnv, warnings: string[]): SamplerSetting {
  const name = value(env, 'OTEL_TRACES_SAMPLER')?.toLowerCase() ?? 'parentbased_always_on';
  let sampler = SAMPLERS[name];
  if (sampler === undefined) {
    warnings.push(`OTEL_TRACES_SAMPLER=${name} is not one this gate knows; using parentbased_always_on`);
    sampler = { kind: 'always_on', parentBased: true };
  }
  let ratio = 1;
  const arg = value(env, 'OTEL_TRACES_SAMPLER_ARG');
  if (sampler.kind === 'traceidratio' && arg !== undefined) {
    const n = Number(arg);
    if (Number.isFinite(n) && n >= 0 && n <= 1) ratio = n;
    else warnings.push(`OTEL_TRACES_SAMPLER_ARG=${arg} is not a ratio from 0 to 1; using 1`);
  }
  return Object.freeze({ ...sampler, ratio });
}
