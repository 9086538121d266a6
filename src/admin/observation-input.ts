/**
 * Validation of evidence from outside the gate (docs/design.md §3 "Observations"): an
 * operator's resolution (`operations resolve`, `POST /api/operations/:id/resolve`, the operation
 * page's form) and an observation a destination or an agent posts
 * (`POST /api/operations/:id/observations`, `POST /api/observations`). One set of rules for every
 * door; each turns `InputError` into its own refusal.
 *
 * Secrets: a posted payload is never stored, only its fingerprint (RFC 8785 JSON, HMAC-SHA-256
 * under the gate's authority key, so a short secret in it cannot be found again by hashing
 * guesses), so a webhook body carrying a customer's card or a signing secret cannot leak into the
 * trail.
 */
import { canonicalJson, hmacRef } from '../engine/index.js';
import {
  type ObservationInput,
  type OperationLookup,
  POSTED_OBSERVATION_KINDS,
  type PostedObservationKind,
  SETTLED_STATES,
  type SettledState,
} from '../store/index.js';
import {
  CONTROL,
  InputError,
  LONE_SURROGATE,
  parseDecidedBy,
  parseDecisionReason,
  parseName,
} from './admin-input.js';

/** A destination reference is a URL or an id: at most this long. */
export const MAX_REF_CHARS = 2000;
/** `duplicate_effect_confirmed` names every effect it found; more than this is not one operation's. */
export const MAX_REFS = 20;

const FINGERPRINT = /^[a-z0-9-]{1,20}:[0-9a-fA-F]{16,128}$/;

/** The members `POST /api/operations/:id/resolve` and the page's form take. */
export const RESOLUTION_FIELDS = ['as', 'by', 'reason', 'ref'] as const;
/** The members an observation takes; `POST /api/observations` also takes `operation`. */
export const OBSERVATION_FIELDS = [
  'kind',
  'by',
  'note',
  'settles',
  'status',
  'destination_ref',
  'payload',
  'payload_fingerprint',
] as const;

/** `as`: the state an operator settles an unknown operation in. */
export function parseSettledState(name: string, value: unknown): SettledState {
  if (typeof value === 'string' && (SETTLED_STATES as readonly string[]).includes(value)) {
    return value as SettledState;
  }
  throw new InputError(`${name} must be one of ${SETTLED_STATES.join(', ')}; got ${show(value)}`);
}

/** One destination reference (a URL or an id): 1..2000 characters, no control characters. */
export function parseRef(name: string, value: unknown): string {
  const text = typeof value === 'string' ? value.trim() : '';
  if (text.length === 0 || text.length > MAX_REF_CHARS || CONTROL.test(text) || LONE_SURROGATE.test(text)) {
    throw new InputError(
      `${name} must be the destination's reference (a URL or an id): 1 to ${MAX_REF_CHARS} characters without control characters`,
    );
  }
  return text;
}

/**
 * An operator's resolution of one operation: `as`, `by`, `reason`, and `ref` (one reference, or a
 * list: `duplicate_effect_confirmed` records every one).
 */
export function parseResolution(
  operationId: string,
  raw: { readonly as: unknown; readonly by: unknown; readonly reason: unknown; readonly ref?: unknown },
  source: string,
  names: (field: string) => string = (field) => field,
): ObservationInput {
  const settles = parseSettledState(names('as'), raw.as);
  const refs = parseRefs(names('ref'), raw.ref);
  if (settles === 'failed' && refs.length > 0) {
    throw new InputError(`${names('ref')} names an effect; an operation resolved as failed had none`);
  }
  if (settles === 'succeeded' && refs.length > 1) {
    throw new InputError(
      `${names('ref')} is given ${refs.length} times; one effect has one reference (several: --as duplicate_effect_confirmed)`,
    );
  }
  return {
    operationId,
    kind: 'operator_decision',
    by: parseDecidedBy(names('by'), raw.by),
    reason: parseDecisionReason(names('reason'), raw.reason),
    settles,
    status: null,
    destinationRef: refs[0] ?? null,
    refs,
    payloadFingerprint: null,
    source,
  };
}

/**
 * An observation a destination (a callback), an agent (a read-back) or an operator (a note)
 * posts. `payload` is fingerprinted here with `fingerprintKey` and dropped; `payload_fingerprint`
 * is taken as given.
 */
export function parseObservation(
  operationId: string,
  body: Readonly<Record<string, unknown>>,
  fingerprintKey: string,
): ObservationInput {
  const kind = body['kind'];
  if (typeof kind !== 'string' || !(POSTED_OBSERVATION_KINDS as readonly string[]).includes(kind)) {
    throw new InputError(
      `kind must be one of ${POSTED_OBSERVATION_KINDS.join(', ')}; got ${show(kind)} (an operator settles an operation with POST /api/operations/:id/resolve)`,
    );
  }
  const settles = body['settles'] === undefined ? null : parseSettledState('settles', body['settles']);
  if (kind === 'operator_note' && settles !== null) {
    throw new InputError(
      'an operator_note never settles an operation; resolve it with POST /api/operations/:id/resolve',
    );
  }
  const status = body['status'];
  if (
    status !== undefined &&
    !(Number.isInteger(status) && (status as number) >= 100 && (status as number) <= 599)
  ) {
    throw new InputError(`status must be an HTTP status code (100 to 599); got ${show(status)}`);
  }
  if (body['payload'] !== undefined && body['payload_fingerprint'] !== undefined) {
    throw new InputError('give payload or payload_fingerprint, not both');
  }
  return {
    operationId,
    kind: kind as PostedObservationKind,
    by: parseDecidedBy('by', body['by']),
    reason: body['note'] === undefined ? null : parseDecisionReason('note', body['note']),
    settles,
    status: (status as number | undefined) ?? null,
    destinationRef:
      body['destination_ref'] === undefined ? null : parseRef('destination_ref', body['destination_ref']),
    refs: [],
    payloadFingerprint:
      body['payload'] !== undefined
        ? payloadFingerprint(body['payload'], fingerprintKey)
        : body['payload_fingerprint'] === undefined
          ? null
          : parseFingerprint(body['payload_fingerprint']),
    source: 'api',
  };
}

/** `operation` of `POST /api/observations`: `{ "id" }`, `{ "idempotency_key" }` or `{ "destination_ref" }`. */
export function parseOperationSelector(value: unknown): { readonly id: string } | OperationLookup {
  const ways = 'give exactly one of id, idempotency_key or destination_ref';
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InputError(`operation must be an object naming the operation: ${ways}`);
  }
  const entries = Object.entries(value);
  if (entries.length !== 1) throw new InputError(`operation: ${ways}`);
  const [name, given] = entries[0]!;
  const text = typeof given === 'string' ? given : '';
  if (name === 'id') return { id: parseName('operation.id', text) };
  if (name === 'idempotency_key') return { idempotencyKey: parseName('operation.idempotency_key', text) };
  if (name === 'destination_ref') return { destinationRef: parseRef('operation.destination_ref', given) };
  throw new InputError(`operation: unknown member ${show(name)}; ${ways}`);
}

/**
 * `hmac-sha256:<hex>` of the payload as RFC 8785 JSON, keyed: what the trail keeps of it. A number
 * JSON cannot carry exactly (an integer beyond 2^53) is refused: two deliveries differing only in
 * it would read as one.
 */
export function payloadFingerprint(payload: unknown, key: string): string {
  let text: string;
  try {
    refuseInexactIntegers(payload);
    text = canonicalJson(payload);
  } catch (err) {
    // A payload nested deeper than the stack (the body limit allows ~30k levels) is refused, not a crash.
    throw new InputError(
      err instanceof RangeError
        ? 'payload nests too deep to fingerprint; send payload_fingerprint instead'
        : `payload: ${(err as Error).message}`,
    );
  }
  return hmacRef(key, text);
}

function refuseInexactIntegers(value: unknown): void {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'number' && Number.isInteger(v) && !Number.isSafeInteger(v)) {
      throw new InputError(
        `payload holds the number ${v}, beyond what a JSON number carries exactly (2^53): send payload_fingerprint (your own hash of the raw body) instead`,
      );
    }
    if (typeof v === 'object' && v !== null) for (const child of Object.values(v)) stack.push(child);
  }
}

function parseFingerprint(value: unknown): string {
  if (typeof value === 'string' && FINGERPRINT.test(value)) return value.toLowerCase();
  throw new InputError(`payload_fingerprint must look like sha256:<hex>; got ${show(value)}`);
}

function parseRefs(name: string, value: unknown): string[] {
  if (value === undefined || value === null) return [];
  const list = Array.isArray(value) ? value : [value];
  if (list.length > MAX_REFS)
    throw new InputError(`${name} is given ${list.length} times; at most ${MAX_REFS}`);
  const refs = list.map((v) => parseRef(name, v));
  return [...new Set(refs)];
}

function show(value: unknown): string {
  const text = typeof value === 'string' ? JSON.stringify(value) : String(value);
  return text.length > 60 ? `${text.slice(0, 60)}…` : text;
}
