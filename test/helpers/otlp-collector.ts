/**
 * An in-process OTLP/HTTP collector for tests: a loopback server that takes `POST /v1/traces` with
 * a JSON `ExportTraceServiceRequest` (what @opentelemetry/exporter-trace-otlp-http sends) and keeps
 * every span, flattened with its attributes as plain values.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export type AttributeValue = string | number | boolean | null;

export interface CollectedSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** '' for a root span. */
  readonly parentSpanId: string;
  readonly name: string;
  /** OTLP SpanKind number: 1 internal, 2 server, 3 client. */
  readonly kind: number;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  readonly status: number;
  readonly attributes: Readonly<Record<string, AttributeValue>>;
  readonly resource: Readonly<Record<string, AttributeValue>>;
}

export interface OtlpCollector {
  /** `http://127.0.0.1:<port>`: the base `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  readonly url: string;
  readonly spans: CollectedSpan[];
  /** Every export request's path and headers. */
  readonly exports: { readonly path: string; readonly headers: IncomingHttpHeaders }[];
  /** Resolves with the spans once `count` of them match `where`, or rejects after `timeoutMs`. */
  waitFor(
    where: (span: CollectedSpan) => boolean,
    count?: number,
    timeoutMs?: number,
  ): Promise<CollectedSpan[]>;
  close(): Promise<void>;
}

interface OtlpAnyValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
}
interface OtlpKeyValue {
  key: string;
  value: OtlpAnyValue;
}
interface OtlpRequest {
  resourceSpans?: {
    resource?: { attributes?: OtlpKeyValue[] };
    scopeSpans?: {
      spans?: {
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind: number;
        status?: { code?: number };
        attributes?: OtlpKeyValue[];
      }[];
    }[];
  }[];
}

export async function startOtlpCollector(): Promise<OtlpCollector> {
  const spans: CollectedSpan[] = [];
  const exports: { path: string; headers: IncomingHttpHeaders }[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      exports.push({ path: req.url ?? '', headers: req.headers });
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as OtlpRequest;
      for (const rs of body.resourceSpans ?? []) {
        const resource = flatten(rs.resource?.attributes);
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            spans.push({
              traceId: s.traceId,
              spanId: s.spanId,
              parentSpanId: s.parentSpanId ?? '',
              name: s.name,
              kind: s.kind,
              status: s.status?.code ?? 0,
              attributes: flatten(s.attributes),
              resource,
            });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    exports,
    async waitFor(where, count = 1, timeoutMs = 10_000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const found = spans.filter(where);
        if (found.length >= count) return found;
        if (Date.now() > until) {
          throw new Error(
            `${found.length} of ${count} spans arrived; got ${JSON.stringify(spans.map((s) => s.name))}`,
          );
        }
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function flatten(attributes: OtlpKeyValue[] | undefined): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const { key, value } of attributes ?? []) {
    out[key] =
      value.stringValue ??
      (value.intValue !== undefined ? Number(value.intValue) : undefined) ??
      value.doubleValue ??
      value.boolValue ??
      null;
  }
  return out;
}
