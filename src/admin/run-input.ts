/**
 * Validation of a run release, the same for `effectgate runs release` and
 * `POST /api/runs/:id/release`: who lets a halted run go on, and why, are recorded with it.
 */
import type { RunReleaseInput } from '../store/index.js';
import { parseDecidedBy, parseDecisionReason, parseName, parseOptionalScope } from './admin-input.js';

/** The members `POST /api/runs/:id/release` takes. */
export const RUN_RELEASE_FIELDS = ['tenant', 'area', 'agent', 'by', 'reason'] as const;

/** `by` and `reason` (required), the scope as `tenant`, `area`, `agent` (all or none: none = the one halted). */
export function parseRunRelease(
  runId: string,
  raw: Readonly<Partial<Record<(typeof RUN_RELEASE_FIELDS)[number], unknown>>>,
  names: (field: string) => string = (field) => field,
): RunReleaseInput {
  return {
    runId: parseName('run id', runId),
    scope: parseOptionalScope(raw, names),
    by: parseDecidedBy(names('by'), raw.by),
    reason: parseDecisionReason(names('reason'), raw.reason),
  };
}
