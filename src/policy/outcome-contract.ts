import type {
  AnswerConditions,
  CompiledPath,
  OutcomeClass,
  OutcomeContract,
  StatusSelector,
} from './types.js';

/** What a tool reads in the answer besides its status (`failed_if`, `unknown_if`, `error_code`). */
export interface AnswerReading {
  readonly failedIf: AnswerConditions | null;
  readonly unknownIf: AnswerConditions | null;
  readonly errorCode: CompiledPath | null;
  /** `outcome.accepted`: exact statuses meaning accepted, not done (202). */
  readonly accepted?: readonly number[];
  /** `outcome.accepted_ref`: where the accepted work's reference is in the answer; else `Location`. */
  readonly acceptedRef?: CompiledPath | null;
}

const NO_READING: AnswerReading = Object.freeze({ failedIf: null, unknownIf: null, errorCode: null });

/** The contract a tool gets when its policy says nothing (docs/policy-reference.md, `tools[].outcome`). */
export const DEFAULT_OUTCOME: Readonly<Record<OutcomeClass, readonly string[]>> = Object.freeze({
  succeeded: Object.freeze(['2xx']),
  failed: Object.freeze(['4xx']),
  unknown: Object.freeze(['5xx']),
});

export const OUTCOME_CLASSES: readonly OutcomeClass[] = Object.freeze(['succeeded', 'failed', 'unknown']);

/** Parses `2xx` (a class) or `409` / `"409"` (an exact code); throws on anything else. */
export function parseStatusSelector(value: unknown): StatusSelector {
  if (typeof value === 'number' && Number.isInteger(value) && value >= 100 && value <= 599) {
    return { kind: 'code', code: value };
  }
  if (typeof value === 'string') {
    const cls = /^([1-5])xx$/i.exec(value);
    if (cls !== null) return { kind: 'class', hundreds: Number(cls[1]) };
    if (/^[1-5]\d\d$/.test(value)) return { kind: 'code', code: Number(value) };
  }
  throw new Error(`${JSON.stringify(value)} is not a status class (2xx) or a status code (100-599)`);
}

export function selectorText(s: StatusSelector): string {
  return s.kind === 'class' ? `${s.hundreds}xx` : String(s.code);
}

/**
 * Builds a contract whose `classify` is a table lookup, computed once here because it runs on
 * every governed response. Precedence: exact codes over classes, then succeeded, failed, unknown;
 * a status nobody names is `unknown`. Overlaps are rejected by the schema before this runs.
 */
export function buildOutcomeContract(
  lists: Readonly<Record<OutcomeClass, readonly StatusSelector[]>>,
  toolError: OutcomeClass = 'failed',
  reading: AnswerReading = NO_READING,
): OutcomeContract {
  const table: (OutcomeClass | undefined)[] = new Array(600).fill(undefined);
  for (const kind of ['class', 'code'] as const) {
    // Classes first and codes second so that an exact code overwrites its class.
    for (const outcome of [...OUTCOME_CLASSES].reverse()) {
      for (const s of lists[outcome]) {
        if (s.kind !== kind) continue;
        if (s.kind === 'code') table[s.code] = outcome;
        else for (let c = s.hundreds * 100; c < s.hundreds * 100 + 100; c++) table[c] = outcome;
      }
    }
  }
  const frozenTable = Object.freeze(table);
  return Object.freeze({
    succeeded: Object.freeze(lists.succeeded.map((s) => Object.freeze({ ...s }))),
    failed: Object.freeze(lists.failed.map((s) => Object.freeze({ ...s }))),
    unknown: Object.freeze(lists.unknown.map((s) => Object.freeze({ ...s }))),
    toolError,
    failedIf: reading.failedIf,
    unknownIf: reading.unknownIf,
    errorCode: reading.errorCode,
    accepted: Object.freeze([...(reading.accepted ?? [])]),
    acceptedRef: reading.acceptedRef ?? null,
    classify(status: number): OutcomeClass {
      return (Number.isInteger(status) ? frozenTable[status] : undefined) ?? 'unknown';
    },
  });
}
