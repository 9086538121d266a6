import { isMap, isScalar, isSeq } from 'yaml';
import type { PolicyReader, Slot, SourcePosition } from './policy-reader.js';

/**
 * What the gate answers an example's request with: one of its verdicts (the `Effectgate-Verdict`
 * header), or `pass` when it answers without one (an unclassified request sent as it is).
 */
export type ExpectedVerdict =
  | 'allow'
  | 'duplicate'
  | 'pending'
  | 'hold'
  | 'halted'
  | 'block'
  | 'would_duplicate'
  | 'would_pending'
  | 'would_hold'
  | 'would_halted'
  | 'would_block'
  | 'pass';

/** A tool with `mode: shadow` answers `would_*` where enforce mode answers with its verdict. */
export const EXPECTED_VERDICTS: readonly ExpectedVerdict[] = [
  'allow',
  'duplicate',
  'pending',
  'hold',
  'halted',
  'block',
  'would_duplicate',
  'would_pending',
  'would_hold',
  'would_halted',
  'would_block',
  'pass',
];

export const EXAMPLE_FIELDS = ['name', 'request', 'expect', 'response'] as const;
export const EXAMPLE_REQUEST_FIELDS = ['method', 'url', 'headers', 'body'] as const;
export const EXAMPLE_EXPECT_FIELDS = ['tool', 'key', 'first', 'second', 'status', 'sent'] as const;
export const EXAMPLE_RESPONSE_FIELDS = ['status', 'headers', 'body'] as const;

/** A request an example sends; `body` is the YAML value (sent as JSON, or as a form). */
export interface ExampleRequest {
  readonly method: string;
  readonly url: URL;
  /** Lower-case names. */
  readonly headers: Readonly<Record<string, string>>;
  /** `undefined`: no body. */
  readonly body: unknown;
}

/** What the fake destination answers every request of the example with. */
export interface ExampleResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: unknown;
}

export interface ExampleExpectation {
  /** The tool id that classifies the request; `null`: unclassified. */
  readonly tool: string | null;
  /** Where `tool` was written, so a cross-file check can point at an unknown id. */
  readonly toolAt: SourcePosition;
  /** Its dotted field, e.g. `examples[0].expect.tool`. */
  readonly toolField: string;
  /** The duplicate key values the store records; `null`: not checked. */
  readonly key: readonly unknown[] | null;
  readonly first: ExpectedVerdict;
  /** The verdict of the same request sent again; `null`: sent once only. */
  readonly second: ExpectedVerdict | null;
  /** The status of the first answer; `null`: not checked. */
  readonly status: number | null;
  /** How many requests reached the fake destination; `null`: not checked. */
  readonly sent: number | null;
}

/**
 * A request a policy file says how the gate treats (`examples:`), checked by
 * `effectgate policies test` so a classification's match, key and window stay what its author meant.
 */
export interface PolicyExample {
  readonly name: string;
  /** Where the example starts: the report's `file:line`. */
  readonly at: SourcePosition;
  readonly request: ExampleRequest;
  /** What the fake destination answers the first request with (`responses[0]`). */
  readonly response: ExampleResponse;
  /**
   * Its answers in order, one per request that reaches it; the last answers any further one. A
   * list lets an example show a destination that refuses first (`200 {"ok": false}`) and then does it.
   */
  readonly responses: readonly ExampleResponse[];
  readonly expect: ExampleExpectation;
}

const DEFAULT_RESPONSE: ExampleResponse = Object.freeze({ status: 201, headers: {}, body: {} });

/** Reads a file's `examples:` list, recording every problem; returns the valid examples. */
export function readExamples(r: PolicyReader, slot: Slot): PolicyExample[] {
  const out: PolicyExample[] = [];
  for (const item of r.items(slot) ?? []) {
    const before = r.issueCount;
    const f = r.fields(item, EXAMPLE_FIELDS, ['name', 'request', 'expect']);
    if (f === null) continue;
    const nameSlot = f.get('name');
    const name = nameSlot === undefined ? null : r.string(nameSlot);
    const requestSlot = f.get('request');
    const request = requestSlot === undefined ? null : readRequest(r, requestSlot);
    const expectSlot = f.get('expect');
    const expect = expectSlot === undefined ? null : readExpect(r, expectSlot);
    const responseSlot = f.get('response');
    const responses = responseSlot === undefined ? [DEFAULT_RESPONSE] : readResponses(r, responseSlot);
    const response = responses?.[0];
    if (
      r.issueCount !== before ||
      name === null ||
      request === null ||
      expect === null ||
      response === undefined
    )
      continue;
    out.push({ name, at: r.position(item.at), request, response, responses: responses!, expect });
  }
  return out;
}

function readRequest(r: PolicyReader, slot: Slot): ExampleRequest | null {
  const f = r.fields(slot, EXAMPLE_REQUEST_FIELDS, ['method', 'url']);
  if (f === null) return null;
  const methodSlot = f.get('method');
  const method = methodSlot === undefined ? null : r.string(methodSlot);
  if (methodSlot !== undefined && method !== null && !/^[A-Za-z]+$/.test(method)) {
    r.issue(
      methodSlot.at,
      methodSlot.field,
      `expected an HTTP method such as POST, got ${JSON.stringify(method)}`,
    );
    return null;
  }
  const urlSlot = f.get('url');
  const text = urlSlot === undefined ? null : r.string(urlSlot);
  let url: URL | null = null;
  if (urlSlot !== undefined && text !== null) {
    url = URL.canParse(text) ? new URL(text) : null;
    if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
      r.issue(urlSlot.at, urlSlot.field, `expected an absolute http(s) URL, got ${JSON.stringify(text)}`);
      url = null;
    }
  }
  const headersSlot = f.get('headers');
  const headers = headersSlot === undefined ? {} : readHeaders(r, headersSlot);
  const bodySlot = f.get('body');
  const body = bodySlot === undefined ? undefined : readValue(r, bodySlot);
  if (method === null || url === null || headers === null) return null;
  return { method: method.toUpperCase(), url, headers, body };
}

function readExpect(r: PolicyReader, slot: Slot): ExampleExpectation | null {
  const f = r.fields(slot, EXAMPLE_EXPECT_FIELDS, ['tool', 'first']);
  if (f === null) return null;
  const toolSlot = f.get('tool');
  let tool: string | null | undefined;
  if (toolSlot !== undefined) {
    // `tool: null` (or `~`) says the request is unclassified; anything else names a tool id.
    tool = isScalar(toolSlot.node) && toolSlot.node.value === null ? null : (r.string(toolSlot) ?? undefined);
  }
  const keySlot = f.get('key');
  let key: unknown[] | null = null;
  if (keySlot !== undefined) {
    const items = r.items(keySlot);
    key = items === null ? null : items.map((i) => readValue(r, i));
  }
  const firstSlot = f.get('first');
  const first = firstSlot === undefined ? null : r.oneOf(firstSlot, EXPECTED_VERDICTS);
  const secondSlot = f.get('second');
  const second = secondSlot === undefined ? null : r.oneOf(secondSlot, EXPECTED_VERDICTS);
  const statusSlot = f.get('status');
  const status = statusSlot === undefined ? null : readStatus(r, statusSlot);
  const sentSlot = f.get('sent');
  const sent = sentSlot === undefined ? null : r.integer(sentSlot, 0);
  if (tool === undefined || toolSlot === undefined || first === null) return null;
  return {
    tool,
    toolAt: r.position(toolSlot.at),
    toolField: toolSlot.field,
    key,
    first,
    second,
    status,
    sent,
  };
}

/** One answer for every request, or a non-empty list of answers in order. */
function readResponses(r: PolicyReader, slot: Slot): ExampleResponse[] | null {
  if (!isSeq(slot.node)) {
    const one = readResponseStub(r, slot);
    return one === null ? null : [one];
  }
  const items = r.items(slot) ?? [];
  if (items.length === 0) {
    r.issue(slot.at, slot.field, 'must list at least one answer');
    return null;
  }
  const out = items.map((item) => readResponseStub(r, item));
  return out.every((x): x is ExampleResponse => x !== null) ? out : null;
}

function readResponseStub(r: PolicyReader, slot: Slot): ExampleResponse | null {
  const f = r.fields(slot, EXAMPLE_RESPONSE_FIELDS, ['status']);
  if (f === null) return null;
  const statusSlot = f.get('status');
  const status = statusSlot === undefined ? null : readStatus(r, statusSlot);
  const headersSlot = f.get('headers');
  const headers = headersSlot === undefined ? {} : readHeaders(r, headersSlot);
  const bodySlot = f.get('body');
  const body = bodySlot === undefined ? {} : readValue(r, bodySlot);
  if (status === null || headers === null) return null;
  return { status, headers, body };
}

function readStatus(r: PolicyReader, slot: Slot): number | null {
  const status = r.integer(slot, 100);
  if (status === null) return null;
  if (status > 599) {
    r.issue(slot.at, slot.field, `expected an HTTP status from 100 to 599, got ${status}`);
    return null;
  }
  return status;
}

function readHeaders(r: PolicyReader, slot: Slot): Record<string, string> | null {
  const entries = r.entries(slot);
  if (entries === null) return null;
  const out: Record<string, string> = {};
  for (const [name, value] of entries) {
    const v = r.scalar(value);
    if (v === undefined) return null;
    out[name.toLowerCase()] = v === null ? '' : String(v);
  }
  return out;
}

/** Any YAML value as plain JS, aliases resolved by the reader (which also bounded their count). */
function readValue(r: PolicyReader, slot: Slot): unknown {
  if (isMap(slot.node)) {
    const out: Record<string, unknown> = {};
    // Defined, not assigned: a `__proto__` member is data here, as JSON.parse would keep it.
    for (const [k, v] of r.entries(slot) ?? [])
      Object.defineProperty(out, k, {
        value: readValue(r, v),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    return out;
  }
  if (isSeq(slot.node)) return (r.items(slot) ?? []).map((i) => readValue(r, i));
  return r.scalar(slot) ?? null;
}
