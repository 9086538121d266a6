import { type ExportResult, ExportResultCode } from '@opentelemetry/core';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace';
import type { GateLogger } from './gate.js';

/**
 * The OTLP exporter, saying so in the gate's log when exports fail (the SDK would tell only its
 * own diagnostics logger, which the gate does not register globally): once when failures start,
 * once when they stop, never per batch. Loaded with otel-tracer.ts, only when tracing is on.
 */
export class LoggedExporter implements SpanExporter {
  readonly #inner: SpanExporter;
  readonly #logger: GateLogger;
  #failing = false;

  constructor(inner: SpanExporter, logger: GateLogger) {
    this.#inner = inner;
    this.#logger = logger;
  }

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.#inner.export(spans, (result) => {
      if (result.code !== ExportResultCode.SUCCESS && !this.#failing) {
        this.#failing = true;
        this.#logger.warn(
          { err: result.error?.message ?? 'failed', spans: spans.length },
          'could not export traces to the OTLP endpoint; dropping them until it answers',
        );
      } else if (result.code === ExportResultCode.SUCCESS && this.#failing) {
        this.#failing = false;
        this.#logger.info({}, 'exporting traces again');
      }
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.#inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.#inner.forceFlush?.() ?? Promise.resolve();
  }
}
