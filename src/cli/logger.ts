import { type DestinationStream, type Logger, type LoggerOptions, pino } from 'pino';
import type { AdminLogger } from '../admin/index.js';
import type { GateLogger } from '../engine/index.js';

/** Levels `EFFECTGATE_LOG_LEVEL` accepts; anything else falls back to `info` with a warning. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const CREDENTIAL_FIELDS = [
  'authorization',
  '["proxy-authorization"]',
  'cookie',
  '["set-cookie"]',
  '["x-api-key"]',
  '["api-key"]',
  '["x-auth-token"]',
  'password',
  'secret',
  'token',
];

/**
 * Fields censored wherever they appear at the top level, one level down (`headers.cookie`,
 * `err.authorization`) or under a nested `headers` object (`req.headers.authorization`). The gate
 * never logs headers, bodies or key values; this is a second line of defence, not the first.
 */
export const REDACT_PATHS: readonly string[] = [
  ...CREDENTIAL_FIELDS,
  ...CREDENTIAL_FIELDS.map((f) => (f.startsWith('[') ? `*${f}` : `*.${f}`)),
  ...CREDENTIAL_FIELDS.map((f) => (f.startsWith('[') ? `*.headers${f}` : `*.headers.${f}`)),
];

export interface CreateLoggerOptions {
  /** A pino level name (default `info`). */
  readonly level?: string;
  /** Where the JSON lines go (default: stderr, written synchronously so no line is lost on exit). */
  readonly destination?: DestinationStream;
}

/** The CLI's logger: one JSON object per line, pino underneath. Satisfies `GateLogger` and `AdminLogger`. */
export type EffectgateLogger = Logger & GateLogger & AdminLogger;

/**
 * JSON lines (`{"level":"info","time":"…","pid":…,"msg":"…",…fields}`) on stderr; stdout stays for
 * the human-readable "listening" line.
 */
export function createLogger(options: CreateLoggerOptions = {}): EffectgateLogger {
  const requested = options.level ?? 'info';
  const known = (LOG_LEVELS as readonly string[]).includes(requested);
  const config: LoggerOptions = {
    level: known ? requested : 'info',
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    redact: { paths: [...REDACT_PATHS], censor: '[redacted]' },
  };
  const logger = pino(config, options.destination ?? pino.destination({ dest: 2, sync: true }));
  if (!known)
    logger.warn({ requested, allowed: LOG_LEVELS }, 'unknown EFFECTGATE_LOG_LEVEL; logging at info');
  return logger;
}
