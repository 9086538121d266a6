import { isMap } from 'yaml';
import type { PolicyReader, Slot, YamlScalar } from './policy-reader.js';
import { readJsonPath } from './policy-values.js';
import type { AnswerCondition, AnswerConditions, CompiledPath } from './types.js';

export const ANSWER_CONDITION_FIELDS = ['path', 'equals', 'non_empty'] as const;

/**
 * Reads `failed_if` / `unknown_if`: either the short map form `{ $.ok: false }` (each entry one
 * equality) or a list of `{path, equals}` / `{path, non_empty: true}`. Records every problem on the
 * reader; returns `null` when nothing valid was read.
 */
export function readAnswerConditions(r: PolicyReader, slot: Slot): AnswerConditions | null {
  const before = r.issueCount;
  const conditions: AnswerCondition[] = [];
  if (isMap(slot.node)) {
    for (const value of (r.entries(slot) ?? new Map()).values()) {
      const path = readJsonPath(r, { node: value.keyAt, at: value.keyAt, field: value.field });
      const equals = readEquals(r, value);
      if (path !== null && equals !== undefined)
        conditions.push(condition(path, { kind: 'equals', value: equals }));
    }
  } else {
    for (const item of r.items(slot) ?? []) {
      const c = readListItem(r, item);
      if (c !== null) conditions.push(c);
    }
  }
  if (conditions.length === 0 && r.issueCount === before) {
    r.issue(slot.at, slot.field, 'must name at least one condition; omit the field to read only the status');
  }
  return conditions.length === 0 || r.issueCount !== before ? null : answerConditions(conditions);
}

/** Builds the frozen conditions object (also for code that compiles conditions itself). */
export function answerConditions(conditions: readonly AnswerCondition[]): AnswerConditions {
  const frozen = Object.freeze(
    conditions.map((c) => Object.freeze({ ...c, test: Object.freeze({ ...c.test }) })),
  );
  const text = frozen.map((c) => c.text).join(' or ');
  return Object.freeze({
    conditions: frozen,
    match(answer: unknown): string | null {
      for (const c of frozen) if (holds(c, answer)) return c.text;
      return null;
    },
    explain: (): string => text,
  });
}

function readListItem(r: PolicyReader, item: Slot): AnswerCondition | null {
  const f = r.fields(item, ANSWER_CONDITION_FIELDS, ['path']);
  if (f === null) return null;
  const pathSlot = f.get('path');
  const path = pathSlot === undefined ? null : readJsonPath(r, pathSlot);
  const equalsSlot = f.get('equals');
  const nonEmptySlot = f.get('non_empty');
  if ((equalsSlot === undefined) === (nonEmptySlot === undefined)) {
    r.issue(item.at, item.field, 'must have exactly one of equals or non_empty: true');
    return null;
  }
  if (nonEmptySlot !== undefined) {
    const flag = r.boolean(nonEmptySlot);
    if (flag === false)
      r.issue(nonEmptySlot.at, nonEmptySlot.field, 'must be true (use equals for anything else)');
    return path === null || flag !== true ? null : condition(path, { kind: 'non_empty' });
  }
  const value = readEquals(r, equalsSlot!);
  return path === null || value === undefined ? null : condition(path, { kind: 'equals', value });
}

/** A scalar to compare with; a mapping or list is refused (an answer's verdict is a flag or a word). */
function readEquals(r: PolicyReader, slot: Slot): YamlScalar | undefined {
  return r.scalar(slot);
}

function condition(path: CompiledPath, test: AnswerCondition['test']): AnswerCondition {
  const text =
    test.kind === 'equals'
      ? `${path.expression} == ${JSON.stringify(test.value)}`
      : `${path.expression} non_empty`;
  return { path, test, text };
}

function holds(c: AnswerCondition, answer: unknown): boolean {
  for (const v of c.path.evaluate(answer)) {
    if (c.test.kind === 'equals' ? v === c.test.value : !isEmpty(v)) return true;
  }
  return false;
}

function isEmpty(v: unknown): boolean {
  if (v === null || v === undefined || v === '') return true;
  if (Array.isArray(v)) return v.length === 0;
  return typeof v === 'object' && Object.keys(v).length === 0;
}
