import { createHash } from 'node:crypto';
import type { Tool } from '../policy/index.js';
import type { ArgumentDocument } from './argument-document.js';
import { contentTypeOf } from './argument-document.js';
import { ArgumentRefusal } from './argument-refusal.js';
import { SpliceError, spliceFormField, spliceJsonMember } from './body-key-splice.js';
import { bodyLabel } from './body-label.js';
import type { GateRequest } from './types.js';

/**
 * The longest agent key the trail keeps (the store's `attempts.agent_idempotency_key`): Stripe's
 * own limit, and longer than any SDK's generated key. One past it that would be sent as it is
 * (`agent_key: keep`, `require`) is refused; one the gate replaces is recorded cut to this length.
 */
export const MAX_AGENT_KEY_LENGTH = 255;

/**
 * The gate's key for an operation: its id, or, when the destination takes shorter keys than the id
 * (`idempotency.max_length`), the first `maxLength` hex characters of SHA-256(id) (all 64 when
 * `maxLength` is longer). One key per operation, the same on every gate and after restarts. The
 * store derives the very same in `eg_insert_attempt` (the source of truth); this one explains it.
 */
export function gateIdempotencyKey(operationId: string, maxLength: number | null): string {
  if (maxLength === null || operationId.length <= maxLength) return operationId;
  return createHash('sha256').update(operationId, 'utf8').digest('hex').slice(0, maxLength);
}

/**
 * `key` as an RFC 8941 sf-string (`"…"`, `\` and `"` escaped), as
 * draft-ietf-httpapi-idempotency-key-header writes `Idempotency-Key`. Only printable ASCII may be
 * in one: the gate's keys always are (a uuid or hex), an agent's other key is refused before.
 */
export function sfString(key: string): string {
  if (!/^[\x20-\x7e]*$/.test(key)) throw new Error('an sf-string holds printable ASCII only');
  return `"${key.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

/** The string an RFC 8941 sf-string holds, or `null` when `text` is not one. */
export function parseSfString(text: string): string | null {
  const m = /^"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"$/.exec(text);
  return m === null ? null : m[1]!.replace(/\\(["\\])/g, '$1');
}

/**
 * The idempotency key the agent sent itself, read where the tool's destination reads one (its
 * header, unquoted for `format: sf-string`; or its body member), or `null`. Refuses
 * (ArgumentRefusal) a key that cannot be used as the dialect says, and a body the gate's key could
 * not be put into, before anything is reserved. `null` for a tool without `idempotency`.
 */
export function agentIdempotencyKey(request: GateRequest, tool: Tool, args: ArgumentDocument): string | null {
  const idem = tool.idempotency;
  if (idem === null) return null;
  let key: string | null = null;
  let where: string;
  if (idem.header !== null) {
    where = `the ${idem.header} header`;
    const raw = request.headers[idem.header.toLowerCase()];
    if (Array.isArray(raw)) {
      throw ArgumentRefusal.idempotencyKey(null, tool.id, `this request sends ${where} more than once`);
    }
    const text = raw?.trim() ?? '';
    if (text !== '') key = idem.format === 'sf-string' ? (parseSfString(text) ?? text) : text;
  } else {
    const body = idem.body!;
    where = `the body member ${body.path}`;
    const value = memberOf(args.body, body.members);
    if (value !== undefined && value !== null && typeof value !== 'string') {
      throw ArgumentRefusal.idempotencyKey(
        `$.body${body.path.slice(1)}`,
        tool.id,
        `${where} holds a ${typeof value}, not a string`,
      );
    }
    if (typeof value === 'string' && value !== '') key = value;
    // The gate may have to put its key there: find out now, before anything is reserved.
    placeBodyKey(request, tool, 'k');
  }
  if (key === null && idem.agentKey === 'require') {
    throw ArgumentRefusal.idempotencyKey(
      null,
      tool.id,
      `it requires the agent's own key in ${where}; this request has none`,
    );
  }
  if (
    key !== null &&
    idem.format === 'sf-string' &&
    idem.agentKey !== 'replace' &&
    !/^[\x20-\x7e]*$/.test(key)
  ) {
    throw ArgumentRefusal.idempotencyKey(
      null,
      tool.id,
      `the key in ${where} is not printable ASCII, which a Structured Field string cannot hold`,
    );
  }
  if (key !== null && key.length > MAX_AGENT_KEY_LENGTH) {
    if (idem.agentKey !== 'replace') {
      throw ArgumentRefusal.idempotencyKey(
        null,
        tool.id,
        `the key in ${where} is longer than ${MAX_AGENT_KEY_LENGTH} characters, more than the trail can record of a key it sends`,
      );
    }
    key = key.slice(0, MAX_AGENT_KEY_LENGTH);
  }
  return key;
}

/**
 * Where the tool's key goes, as the operation records it (`operations.idempotency_header`): the
 * header name, or the body member's JSONPath (`$.dedup_key`); `null` without `idempotency`.
 */
export function idempotencyPlace(tool: Tool): string | null {
  const idem = tool.idempotency;
  if (idem === null) return null;
  return idem.header ?? idem.body!.path;
}

/**
 * The request as it goes to the destination with `key`: the agent's own key left as it wrote it
 * (the request unchanged), else the key set in the tool's header (in its format) or spliced into
 * its body member, every other byte kept.
 */
export function withIdempotencyKey(
  request: GateRequest,
  tool: Tool,
  key: string,
  agentKey: string | null,
): GateRequest {
  const idem = tool.idempotency;
  if (idem === null || key === agentKey) return request;
  if (idem.header !== null) {
    const value = idem.format === 'sf-string' ? sfString(key) : key;
    return { ...request, headers: { ...request.headers, [idem.header.toLowerCase()]: value } };
  }
  return { ...request, body: placeBodyKey(request, tool, key) };
}

function placeBodyKey(request: GateRequest, tool: Tool, key: string): Uint8Array {
  const body = tool.idempotency!.body!;
  const form = bodyLabel(contentTypeOf(request)) === 'form';
  try {
    return form
      ? spliceFormField(request.body, body.members, key)
      : spliceJsonMember(request.body, body.members, key);
  } catch (err) {
    if (!(err instanceof SpliceError)) throw err;
    throw ArgumentRefusal.idempotencyKey(
      null,
      tool.id,
      `its key goes in the body member ${body.path}, and ${err.message}`,
    );
  }
}

function memberOf(body: unknown, members: readonly string[]): unknown {
  let at: unknown = body;
  for (const m of members) {
    if (at === null || typeof at !== 'object' || Array.isArray(at) || !Object.hasOwn(at, m)) return undefined;
    at = (at as Record<string, unknown>)[m];
  }
  return at;
}
