import { compileJsonPath, parseJsonPath } from './json-path.js';
import type { PolicyReader, Slot } from './policy-reader.js';
import { readDuration, readHeaderName } from './policy-values.js';
import type { CompiledPath, IdempotencyConfig } from './types.js';

// `tools[].idempotency`: how the destination takes an idempotency key (its dialect), read once
// into a frozen value. The key itself is chosen by the store for each attempt (eg_insert_attempt):
// the operation's key, the agent's own (agent_key: keep), or the key of the attempt an unknown
// outcome left behind.

export const IDEMPOTENCY_FIELDS = [
  'header',
  'body',
  'format',
  'max_length',
  'retention',
  'agent_key',
  'honored',
] as const;

export const IDEMPOTENCY_FORMATS = ['token', 'sf-string'] as const;
export const AGENT_KEY_MODES = ['keep', 'replace', 'require'] as const;
/** The header a tool names nothing else for. */
export const DEFAULT_IDEMPOTENCY_HEADER = 'Idempotency-Key';
/** Lower case, as Node exposes response headers (`ResponseConfig.replayedHeader`). */
export const DEFAULT_REPLAYED_HEADER = 'idempotent-replayed';
/** Shorter keys collide too easily to stand for an operation (16 hex characters = 64 bits). */
export const MIN_KEY_LENGTH = 16;

export function readIdempotency(r: PolicyReader, slot: Slot): IdempotencyConfig | null {
  const f = r.fields(slot, IDEMPOTENCY_FIELDS);
  if (f === null) return null;
  const headerSlot = f.get('header');
  const bodySlot = f.get('body');
  if (headerSlot !== undefined && bodySlot !== undefined) {
    r.issue(bodySlot.at, bodySlot.field, 'give header or body, not both: the key goes to one place');
  }
  const header = headerSlot === undefined ? null : readHeaderName(r, headerSlot);
  const body = bodySlot === undefined ? null : readBodyMember(r, bodySlot);
  const format = f.get('format');
  const maxLength = f.get('max_length');
  const retention = f.get('retention');
  const agentKey = f.get('agent_key');
  const honored = f.get('honored');
  return {
    header: body === null ? (header ?? DEFAULT_IDEMPOTENCY_HEADER) : null,
    body,
    format: (format && r.oneOf(format, IDEMPOTENCY_FORMATS)) ?? 'token',
    maxLength: (maxLength && r.integer(maxLength, MIN_KEY_LENGTH)) ?? null,
    retentionMs: (retention && readDuration(r, retention, false, 1)) ?? null,
    agentKey: (agentKey && r.oneOf(agentKey, AGENT_KEY_MODES)) ?? 'keep',
    honored: (honored && r.boolean(honored)) ?? false,
  };
}

/**
 * `body`: a JSONPath of member steps only (`$.dedup_key`, `$.meta.key`), since the key is spliced
 * into one place of the body's bytes: a wildcard, index or descendant step names no single place.
 */
function readBodyMember(r: PolicyReader, slot: Slot): IdempotencyConfig['body'] {
  const text = r.string(slot);
  if (text === null) return null;
  let members: string[];
  try {
    const parsed = parseJsonPath(text);
    members = parsed.segments.map((s) => {
      if (s.type !== 'member')
        throw new Error(`${text}: only member steps ($.a.b) name one place in the body`);
      return s.name;
    });
  } catch (err) {
    r.issue(slot.at, slot.field, (err as Error).message);
    return null;
  }
  if (members.length === 0) {
    r.issue(slot.at, slot.field, `${text}: must name a member of the body, not the body itself`);
    return null;
  }
  const argumentPath: CompiledPath = compileJsonPath(`$.body${text.slice(1)}`);
  return { path: text, members, argumentPath };
}
