/**
 * A stand-in for a destination that honours idempotency keys the way Stripe does, on the shared
 * loopback upstream (`startUpstream`): it keeps a ledger keyed by the idempotency key. The same key
 * with other parameters is refused `400` (`idempotency_error`), the same key with the same
 * parameters answers the stored result again with `Idempotent-Replayed: true`, and only a new key
 * (or none) creates a payment. `POST /v1/payment_intents` reads its key in `Idempotency-Key`
 * (raw, or an RFC 8941 sf-string: `"…"` is read unquoted) and its parameters as a form;
 * `POST /v2/enqueue` reads `dedup_key` in its JSON body, as PagerDuty's Events API v2 does.
 * `dropNextResponse()` makes the next creating request happen and its connection cut before any
 * answer: an outcome nobody knows.
 */
import type { ServerResponse } from 'node:http';
import { type RecordedRequest, startUpstream, type Upstream } from './upstream.js';

export interface LedgerEntry {
  readonly id: string;
  /** The key it was created under (`null`: sent without one). */
  readonly key: string | null;
  /** The parameters as sent (the form, or the JSON body without the key). */
  readonly params: string;
}

export interface IdempotentLedger {
  readonly upstream: Upstream;
  readonly url: string;
  /** Effects created, in order: a payment or an event each. */
  readonly created: LedgerEntry[];
  /** Every request, with the key the ledger read from it and what it did. */
  readonly seen: {
    key: string | null;
    result: 'created' | 'replayed' | 'refused';
    request: RecordedRequest;
  }[];
  dropNextResponse(): void;
  close(): Promise<void>;
}

export async function startIdempotentLedger(): Promise<IdempotentLedger> {
  const byKey = new Map<string, { params: string; status: number; body: string }>();
  const created: LedgerEntry[] = [];
  const seen: IdempotentLedger['seen'] = [];
  let drop = false;
  const send = (
    res: ServerResponse,
    status: number,
    body: string,
    headers: Record<string, string> = {},
  ): void => {
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      ...headers,
    });
    res.end(body);
  };
  const upstream = await startUpstream((request, res, req) => {
    const text = request.body.toString('utf8');
    let key: string | null;
    let params: string;
    let make: (id: string) => unknown;
    if (request.url === '/v2/enqueue') {
      const json = JSON.parse(text) as Record<string, unknown>;
      key = typeof json['dedup_key'] === 'string' ? json['dedup_key'] : null;
      const { dedup_key: _, ...rest } = json;
      params = JSON.stringify(rest);
      make = (id) => ({ status: 'success', message: 'Event processed', dedup_key: key ?? id });
    } else {
      const raw = request.headers['idempotency-key'];
      const header = Array.isArray(raw) ? raw[0] : raw;
      key =
        header === undefined ? null : (/^"(.*)"$/.exec(header)?.[1]?.replace(/\\(["\\])/g, '$1') ?? header);
      params = text;
      make = (id) => ({ id, object: 'payment_intent', ...Object.fromEntries(new URLSearchParams(text)) });
    }
    if (key !== null) {
      const stored = byKey.get(key);
      if (stored !== undefined && stored.params !== params) {
        seen.push({ key, result: 'refused', request });
        return send(
          res,
          400,
          JSON.stringify({
            error: {
              type: 'idempotency_error',
              message: `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${key}' if you meant to execute a different request.`,
            },
          }),
        );
      }
      if (stored !== undefined) {
        seen.push({ key, result: 'replayed', request });
        return send(res, stored.status, stored.body, { 'idempotent-replayed': 'true' });
      }
    }
    const id = `pi_${created.length + 1}`;
    const body = JSON.stringify(make(id));
    const status = request.url === '/v2/enqueue' ? 202 : 200;
    created.push({ id, key, params });
    if (key !== null) byKey.set(key, { params, status, body });
    seen.push({ key, result: 'created', request });
    if (drop) {
      drop = false;
      req.socket.destroy();
      return;
    }
    send(res, status, body);
  });
  return {
    upstream,
    url: upstream.url,
    created,
    seen,
    dropNextResponse: () => {
      drop = true;
    },
    close: () => upstream.close(),
  };
}
