/**
 * Validation of a session grant (docs/design.md §3 "Approvals"), the same for `effectgate approvals
 * grant` and `POST /api/grants`.
 */
import type { GrantInput } from '../store/index.js';
import {
  InputError,
  parseDecidedBy,
  parseDecisionReason,
  parseName,
  parseOptionalScope,
  parsePositiveDuration,
} from './admin-input.js';

/** How long a grant lasts when its author names no `ttl`: a batch recovery, not a standing permission. */
export const DEFAULT_GRANT_TTL = '30m';

/** The members `POST /api/grants` takes. */
export const GRANT_FIELDS = ['run', 'tool', 'tenant', 'area', 'agent', 'by', 'reason', 'ttl'] as const;

/**
 * `run` (required), `tool` (absent: every tool), the scope as `tenant`, `area`, `agent` (all or
 * none: none = the one the run's decisions name), `by`, `reason`, `ttl` (default 30m).
 */
export function parseGrant(
  raw: Readonly<Partial<Record<(typeof GRANT_FIELDS)[number], unknown>>>,
  names: (field: string) => string = (field) => field,
): GrantInput {
  const text = (field: (typeof GRANT_FIELDS)[number]): string | undefined => {
    const v = raw[field];
    if (v === undefined) return undefined;
    if (typeof v !== 'string') throw new InputError(`${names(field)} must be text`);
    return v;
  };
  const run = text('run');
  if (run === undefined) throw new InputError(`${names('run')} is required: the run the grant is for`);
  const tool = text('tool');
  const ttl = text('ttl') ?? DEFAULT_GRANT_TTL;
  return {
    runId: parseName(names('run'), run),
    toolId: tool === undefined ? null : parseName(names('tool'), tool),
    scope: parseOptionalScope(raw, names),
    by: parseDecidedBy(names('by'), raw.by),
    reason: parseDecisionReason(names('reason'), raw.reason),
    ttlMs: boundedTtl(names('ttl'), parsePositiveDuration(names('ttl'), ttl)),
  };
}

/** A grant is for a batch recovery, not a standing permission: at most 7 days (eg_grant.sql). */
export const MAX_GRANT_TTL_MS = 7 * 86_400_000;

function boundedTtl(name: string, ms: number): number {
  if (ms > MAX_GRANT_TTL_MS) throw new InputError(`${name} is at most 7d: a grant is for a batch recovery`);
  return ms;
}
