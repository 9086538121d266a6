import { isSeq } from 'yaml';
import { readAnswerConditions } from './answer-conditions.js';
import { compileJsonPath } from './json-path.js';
import {
  buildOutcomeContract,
  DEFAULT_OUTCOME,
  OUTCOME_CLASSES,
  parseStatusSelector,
  selectorText,
} from './outcome-contract.js';
import type { PolicyReader, Slot } from './policy-reader.js';
import { readArgumentPath, readDuration, readHeaderName, readJsonPath, readMethod } from './policy-values.js';
import type {
  CompiledPath,
  DedupeConfig,
  OutcomeClass,
  OutcomeContract,
  ReconcileConfig,
  ResponseConfig,
  StatusSelector,
  VerdictProtocol,
} from './types.js';

// Section readers for one tool. Each records its issues on the reader and returns a fully
// defaulted value (possibly partial after an error; compileTool drops a tool that had issues).

export const DEDUPE_FIELDS = [
  'key',
  'window',
  'pending_ttl',
  'wait',
  'on_missing',
  'on_expired',
  'scalars',
] as const;
export const OUTCOME_FIELDS = [
  ...OUTCOME_CLASSES,
  'tool_error',
  'failed_if',
  'unknown_if',
  'error_code',
  'accepted',
  'accepted_ref',
] as const;
export const RESPONSE_FIELDS = ['ref', 'replayed_header'] as const;
export const RECONCILE_FIELDS = ['method', 'path', 'items', 'match'] as const;

const MINUTE = 60_000;
// Most list endpoints answer with a JSON array of items.
const DEFAULT_ITEMS = compileJsonPath('$[*]');

export function readDedupe(
  r: PolicyReader,
  slot: Slot,
  captures: readonly string[] | null,
): DedupeConfig | null {
  const f = r.fields(slot, DEDUPE_FIELDS, ['key', 'window']);
  if (f === null) return null;
  const keySlot = f.get('key');
  const keyItems = keySlot === undefined ? [] : (r.items(keySlot) ?? []);
  if (keySlot !== undefined && isEmptyList(keySlot)) {
    r.issue(
      keySlot.at,
      keySlot.field,
      'must list at least one JSONPath; omit dedupe to turn recognition off',
    );
  }
  const key = keyItems
    .map((item) => readArgumentPath(r, item, captures))
    .filter((p): p is CompiledPath => p !== null);
  const window = f.get('window');
  const ttl = f.get('pending_ttl');
  const wait = f.get('wait');
  const onMissing = f.get('on_missing');
  const onExpired = f.get('on_expired');
  const scalars = f.get('scalars');
  return {
    key,
    windowMs: (window && readDuration(r, window, true, 1)) ?? null,
    pendingTtlMs: (ttl && readDuration(r, ttl, false, 1)) ?? 2 * MINUTE,
    waitMs: (wait && readDuration(r, wait, false)) ?? 2_000,
    onMissing: (onMissing && r.oneOf(onMissing, ['block', 'allow'] as const)) ?? 'block',
    onExpired: (onExpired && r.oneOf(onExpired, ['unknown', 'retry'] as const)) ?? 'unknown',
    scalars: (scalars && r.oneOf(scalars, ['conflate', 'exact'] as const)) ?? 'conflate',
  };
}

/**
 * `outcome`: lists left out keep their default, and a status (class or exact code) may sit in
 * only one list, defaults included, since a contradiction would silently pick a winner.
 */
export function readOutcome(
  r: PolicyReader,
  slot: Slot | undefined,
  protocol: VerdictProtocol,
): OutcomeContract {
  const f =
    slot === undefined
      ? new Map<string, Slot>()
      : (r.fields(slot, OUTCOME_FIELDS) ?? new Map<string, Slot>());
  const toolErrorSlot = f.get('tool_error');
  let toolError: OutcomeClass = 'failed';
  if (toolErrorSlot !== undefined) {
    // An MCP tool execution error (`result.isError`) exists only in a JSON-RPC response.
    if (protocol !== 'jsonrpc') {
      r.issue(
        toolErrorSlot.at,
        toolErrorSlot.field,
        'tool_error applies only to tools with verdict: { protocol: jsonrpc }',
      );
    } else toolError = r.oneOf(toolErrorSlot, OUTCOME_CLASSES) ?? 'failed';
  }
  const lists: Record<OutcomeClass, StatusSelector[]> = { succeeded: [], failed: [], unknown: [] };
  const owner = new Map<string, OutcomeClass>();
  for (const outcome of OUTCOME_CLASSES) {
    const listSlot = f.get(outcome);
    const entries: { value: unknown; slot: Slot | null }[] =
      listSlot === undefined
        ? DEFAULT_OUTCOME[outcome].map((value) => ({ value, slot: null }))
        : (r.items(listSlot) ?? []).map((item) => ({ value: r.scalar(item), slot: item }));
    for (const { value, slot: at } of entries) {
      if (value === undefined) continue; // wrong type, already reported
      let selector: StatusSelector;
      try {
        selector = parseStatusSelector(value);
      } catch (err) {
        if (at !== null) r.issue(at.at, at.field, (err as Error).message);
        continue;
      }
      const text = selectorText(selector);
      const previous = owner.get(text);
      if (previous === outcome) continue;
      if (previous !== undefined) {
        const where = at ?? listSlot ?? slot;
        // Name the list that was defaulted: the user may not know it has a value at all.
        const defaulted = at === null ? outcome : f.has(previous) ? null : previous;
        const note =
          defaulted === null ? '' : ` (${defaulted} defaults to [${DEFAULT_OUTCOME[defaulted].join(', ')}])`;
        r.issue(
          where?.at ?? null,
          where?.field ?? 'outcome',
          `${text} is listed in both ${previous} and ${outcome}${note}`,
        );
        continue;
      }
      owner.set(text, outcome);
      lists[outcome].push(selector);
    }
  }
  const failedIf = f.get('failed_if');
  const unknownIf = f.get('unknown_if');
  const errorCode = f.get('error_code');
  const acceptedRef = f.get('accepted_ref');
  return buildOutcomeContract(lists, toolError, {
    failedIf: failedIf === undefined ? null : readAnswerConditions(r, failedIf),
    unknownIf: unknownIf === undefined ? null : readAnswerConditions(r, unknownIf),
    errorCode: errorCode === undefined ? null : readJsonPath(r, errorCode),
    accepted: readAccepted(r, f.get('accepted'), lists),
    acceptedRef: acceptedRef === undefined ? null : readJsonPath(r, acceptedRef),
  });
}

/**
 * `outcome.accepted`: exact 2xx codes meaning "accepted, not done" (202). A code another list names
 * exactly is a contradiction; a class (`2xx` in succeeded) yields to it as an exact code would.
 */
function readAccepted(
  r: PolicyReader,
  slot: Slot | undefined,
  lists: Readonly<Record<OutcomeClass, readonly StatusSelector[]>>,
): readonly number[] {
  if (slot === undefined) return [];
  const out: number[] = [];
  for (const item of r.items(slot) ?? []) {
    const value = r.scalar(item);
    if (value === undefined) continue;
    let selector: StatusSelector;
    try {
      selector = parseStatusSelector(value);
    } catch (err) {
      r.issue(item.at, item.field, (err as Error).message);
      continue;
    }
    if (selector.kind !== 'code' || selector.code < 200 || selector.code > 299) {
      r.issue(item.at, item.field, 'must be an exact 2xx status code, such as 202');
      continue;
    }
    const code = selector.code;
    const owner = OUTCOME_CLASSES.find((c) => lists[c].some((s) => s.kind === 'code' && s.code === code));
    if (owner !== undefined) {
      r.issue(item.at, item.field, `${code} is listed in both ${owner} and accepted`);
      continue;
    }
    if (!out.includes(code)) out.push(code);
  }
  return out;
}

export function readResponse(r: PolicyReader, slot: Slot | undefined): ResponseConfig {
  const f = slot === undefined ? null : r.fields(slot, RESPONSE_FIELDS);
  const ref = f?.get('ref');
  const header = f?.get('replayed_header');
  const headerName = header === undefined ? null : readHeaderName(r, header);
  return {
    ref: ref === undefined ? null : readJsonPath(r, ref),
    // Lower case: Node exposes response headers lower-cased, so the lookup needs no conversion.
    replayedHeader: headerName === null ? null : headerName.toLowerCase(),
  };
}

export function readReconcile(
  r: PolicyReader,
  slot: Slot,
  captures: readonly string[] | null,
): ReconcileConfig | null {
  const f = r.fields(slot, RECONCILE_FIELDS, ['path', 'match']);
  if (f === null) return null;
  const method = f.get('method');
  const pathSlot = f.get('path');
  const items = f.get('items');
  const matchSlot = f.get('match');
  const match: { remote: CompiledPath; argument: CompiledPath }[] = [];
  const entries = matchSlot === undefined ? null : r.entries(matchSlot);
  if (matchSlot !== undefined && entries?.size === 0) {
    r.issue(
      matchSlot.at,
      matchSlot.field,
      'must pair at least one remote item field with a request argument',
    );
  }
  for (const value of entries?.values() ?? []) {
    const remote = readJsonPath(r, { node: value.keyAt, at: value.keyAt, field: value.field });
    const argument = readArgumentPath(r, value, captures);
    if (remote !== null && argument !== null) match.push({ remote, argument });
  }
  return {
    method: (method && readMethod(r, method)) ?? 'GET',
    path: (pathSlot && readReconcilePath(r, pathSlot, captures)) ?? '',
    items: (items ? readJsonPath(r, items) : null) ?? DEFAULT_ITEMS,
    match,
  };
}

/** A lookup path template: `{name}` placeholders must be captures of the tool's own path. */
function readReconcilePath(r: PolicyReader, slot: Slot, captures: readonly string[] | null): string | null {
  const text = r.string(slot);
  if (text === null) return null;
  if (!text.startsWith('/') || /[\s#]/.test(text)) {
    r.issue(slot.at, slot.field, 'must start with / and contain no whitespace or #');
    return null;
  }
  for (const m of text.matchAll(/\{([^}]*)\}/g)) {
    if (captures !== null && !captures.includes(m[1]!)) {
      r.issue(slot.at, slot.field, `path has no {${m[1]}} capture to fill ${m[0]} with`);
      return null;
    }
  }
  return text;
}

function isEmptyList(slot: Slot): boolean {
  return isSeq(slot.node) && slot.node.items.length === 0;
}
