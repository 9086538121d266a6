import {
  idempotencySummary,
  loadOperationReport,
  type OperationReport,
  shadowDispatchEntry,
  shadowSummary,
  type TrailEntry,
} from '../admin/index.js';
import { EffectgateError } from '../errors.js';
import { type DecisionRecord, openInspectionStore, resolveStoreUrl, type Store } from '../store/index.js';
import { keyText, padEnd, printable, truncate, labelled as wrap, writeJson } from './cli-text.js';
import { type FlagTable, parseFlags } from './parse-flags.js';

export const TRAIL_OPTIONS = {
  store: { type: 'string' },
  json: { type: 'boolean', default: false },
  run: { type: 'string' },
  tool: { type: 'string' },
  key: { type: 'string' },
  color: { type: 'boolean' },
} as const satisfies FlagTable;

export const USAGE = `usage: effectgate trail <operation-id> [--json]
       effectgate trail --run <run-id> [--json]          every decision of a run
       effectgate trail --tool <tool-id> --key '<JSON array of key values>' [--json]
options: --store postgres://…|pglite:DIR (default DATABASE_URL, else pglite:./.effectgate),
         --color/--no-color (default: colour on a terminal only)`;

/**
 * `effectgate trail`: the investigation view of one operation (docs/design.md §3): intent and state on
 * top, then decisions, attempts, observations and approvals in order, each with its time and what
 * caused it. `--json` prints the same report as `GET /api/operations/:id`.
 */
export async function runTrail(argv: readonly string[]): Promise<number> {
  const { values, positionals } = parseFlags(
    { args: [...argv], options: TRAIL_OPTIONS, allowPositionals: true, allowNegative: true },
    USAGE,
  );
  const modes = [positionals.length > 0, values.run !== undefined, values.tool !== undefined];
  if (
    modes.filter(Boolean).length !== 1 ||
    positionals.length > 1 ||
    (values.tool === undefined) !== (values.key === undefined)
  ) {
    process.stderr.write(
      `effectgate: trail needs one operation id, or --run, or --tool with --key\n${USAGE}\n`,
    );
    return 2;
  }
  const keyValues = values.key === undefined ? undefined : parseKey(values.key);
  const paint = painter(
    values.color ?? (process.stdout.isTTY === true && process.env['NO_COLOR'] === undefined),
  );
  const store = await openInspectionStore(resolveStoreUrl(values.store));
  try {
    if (values.run !== undefined) return await runTrailOfRun(store, values.run, values.json, paint);
    let id = positionals[0];
    if (id === undefined) {
      const found = await store.listOperations({ toolId: values.tool!, keyValues: keyValues!, limit: 100 });
      if (found.length !== 1) {
        if (values.json) writeJson({ operations: found });
        else if (found.length === 0)
          process.stdout.write('no operation has this tool and these key values\n');
        else {
          const lines = found.map(
            (o) => `${o.id}  ${padEnd(o.state, 26)} ${o.createdAt}  run ${truncate(printable(o.runId), 30)}`,
          );
          process.stdout.write(`${found.length} operations (newest first); pick one:\n${lines.join('\n')}\n`);
        }
        return found.length === 0 ? 1 : 0;
      }
      id = found[0]!.id;
    }
    const report = await loadOperationReport(store, id);
    if (report === null)
      throw new EffectgateError('EG_ERR_NOT_FOUND', `No operation ${JSON.stringify(id)} in this store.`);
    if (values.json) writeJson(report);
    else process.stdout.write(`${renderReport(report, paint).join('\n')}\n`);
    return 0;
  } finally {
    await store.close();
  }
}

function parseKey(text: string): unknown[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  if (!Array.isArray(value)) {
    throw new EffectgateError(
      'EG_ERR_CONFIG_INVALID',
      `--key must be a JSON array of the key values, e.g. '["acme","api","Disk full"]'`,
    );
  }
  return value;
}

type Paint = (style: 'bold' | 'dim' | 'red' | 'green' | 'yellow' | 'cyan', text: string) => string;

const CODES = { bold: 1, dim: 2, red: 31, green: 32, yellow: 33, cyan: 36 } as const;

function painter(enabled: boolean): Paint {
  return enabled ? (style, text) => `\u001b[${CODES[style]}m${text}\u001b[0m` : (_style, text) => text;
}

function stateStyle(state: string): 'green' | 'red' | 'yellow' | 'cyan' {
  if (state === 'succeeded') return 'green';
  if (state === 'failed' || state === 'duplicate_effect_confirmed') return 'red';
  if (state === 'unknown') return 'yellow';
  return 'cyan';
}

/** The report as text, laid out for 100 columns. */
export function renderReport(report: OperationReport, paint: Paint = painter(false)): string[] {
  const op = report.trail.operation;
  const p = (t: string | null | undefined): string => printable(t ?? '-');
  const labelled = (label: string, text: string): string[] => wrap(label, text, 16);
  const out = [
    `${paint('bold', `operation ${op.id}`)}  ${paint(stateStyle(op.state), op.state.toUpperCase())}  tool ${p(op.tool)}`,
    ...labelled('scope', `${p(op.scope.tenant)} / ${p(op.scope.area)} / ${p(op.scope.agent)}`),
    ...labelled('key', keyText(op.key_values)),
    ...labelled(
      'idempotency',
      op.idempotency === null ? 'none injected' : `${op.idempotency.header}: ${op.idempotency.key}`,
    ),
    ...labelled(
      'owner',
      `run ${p(op.owner.run_id)}  step ${p(op.owner.step)}  worker ${p(op.owner.worker)}  agent ${p(op.owner.agent_version)}`,
    ),
    ...(op.supersedes_operation_id === null ? [] : labelled('supersedes', op.supersedes_operation_id)),
    ...(op.superseded_by.length === 0 ? [] : labelled('superseded by', op.superseded_by.join(', '))),
    ...labelled('created', `${op.created_at}  updated ${op.updated_at}  attempts ${op.attempts}`),
    '',
    paint('bold', 'timeline'),
  ];
  for (const entry of report.trail.timeline) out.push(...renderEntry(entry, op.id, paint));
  return out;
}

const TIME = 26;

function renderEntry(e: TrailEntry, self: string, paint: Paint): string[] {
  const p = (t: string | null | undefined): string => printable(t ?? '-');
  const lines: string[] = [];
  // The time, then the entry wrapped at COLUMNS under it (colour codes only make lines shorter on screen).
  const head = (what: string): void => {
    const wrapped = wrap('', what, TIME);
    wrapped[0] = paint('dim', padEnd(e.at, TIME)) + wrapped[0]!.slice(TIME);
    lines.push(...wrapped);
  };
  const more = (text: string): void => {
    for (const l of wrap('', text, TIME)) lines.push(l);
  };
  switch (e.type) {
    case 'decision': {
      head(
        `decision  ${paint('bold', e.verdict)}${e.reason ? ` (${p(e.reason)})` : ''}  run ${p(e.run_id)}${e.step ? ` step ${p(e.step)}` : ''}`,
      );
      if (e.verdict === 'duplicate')
        more(
          `skipped as a duplicate of ${e.source_operation_id === self ? 'this operation' : p(e.source_operation_id)}`,
        );
      const shadow = shadowSummary(e);
      if (shadow !== null) {
        more(paint('yellow', p(shadow)));
        if (e.source_operation_id !== null && e.source_operation_id !== self)
          more(`earlier operation ${p(e.source_operation_id)}`);
      }
      break;
    }
    case 'attempt': {
      head(
        `attempt #${e.number}  ${paint(e.dispatch_state === 'response_received' ? 'green' : 'yellow', p(e.dispatch_state ?? 'in flight'))}  ${p(e.destination.method)} ${p(e.destination.host)} ${p(e.destination.path)}`,
      );
      // Who made it: the run, and the delegated worker when one did (docs/design.md §3 "Delegation").
      more(
        `by run ${p(e.run_id)}${e.step ? ` step ${p(e.step)}` : ''}${e.worker ? `  worker ${p(e.worker)}` : ''}`,
      );
      if (e.retry_of_number !== null)
        more(
          `retry of #${e.retry_of_number}: reason ${p(e.retry_reason ?? 'none in the closed set')}, decision ${p(e.retry_decision)}, ${e.remaining_attempts ?? '?'} attempt(s) left; ${e.fingerprint_changed ? 'request CHANGED' : 'same request'}`,
        );
      more(
        `route ${p(e.destination.route)}  authority ${p(e.authority_ref)}  fingerprint ${truncate(e.request_fingerprint, 24)}`,
      );
      const key = idempotencySummary(e);
      if (key !== null) more(p(key));
      more(`response: ${p(e.response_summary)}${e.duration_ms === null ? '' : ` (${e.duration_ms} ms)`}`);
      break;
    }
    case 'observation': {
      head(`observation  ${p(e.kind)}: ${paint('bold', p(e.result))}`);
      const f = e.facts as Record<string, unknown>;
      if (e.kind === 'reconciliation') {
        more(
          `looked up ${p(String(f['endpoint'] ?? '?'))}: ${String(f['matches'] ?? 0)} match(es)${Array.isArray(f['remoteRefs']) && f['remoteRefs'].length > 0 ? `, refs ${p(JSON.stringify(f['remoteRefs']))}` : ''}${f['error'] ? `; ${p(String(f['error']))}` : ''}`,
        );
        more(
          e.result === 'match'
            ? 'the effect is at the destination: the operation succeeded (via reconciliation)'
            : e.result === 'multiple'
              ? 'the effect is there MORE THAN ONCE: duplicate_effect_confirmed'
              : 'absence proves little: the outcome stays unknown',
        );
      } else if (e.kind === 'gate_restarted') {
        more('the gate stopped mid-dispatch; after the restart this attempt was marked sent_no_response');
      } else if (e.kind === 'outcome_lost') {
        more(
          'no outcome was recorded before the reservation expired; the attempt was marked sent_no_response',
        );
      } else {
        const refs = Array.isArray(f['refs']) ? f['refs'] : f['destinationRef'] ? [f['destinationRef']] : [];
        more(
          `by ${p(String(f['by'] ?? '?'))}${f['reason'] ? `: ${p(String(f['reason']))}` : ''}${f['status'] === undefined ? '' : `  status ${String(f['status'])}`}${refs.length > 0 ? `  ref ${p(refs.join(', '))}` : ''}${f['payloadFingerprint'] ? `  payload ${p(String(f['payloadFingerprint']))}` : ''}`,
        );
        more(
          e.result === 'noted'
            ? 'recorded as evidence; the state did not change'
            : e.result === 'not_settled'
              ? `it said ${p(String(f['settles'] ?? '?'))}, but the operation was already ${p(String(f['stateAtObservation'] ?? '?'))}: kept as evidence, nothing changed`
              : `settled the operation as ${p(e.result)} (it was ${p(String(f['stateAtObservation'] ?? '?'))})`,
        );
      }
      break;
    }
    case 'approval':
      head(
        `approval  ${paint('bold', e.event)}${e.by ? ` by ${p(e.by)}` : ''}${e.reason ? `: ${p(e.reason)}` : ''}  (${e.approval_id})`,
      );
      if (e.planned_recovery) more(`planned: ${p(e.planned_recovery)}`);
      if (e.grant_id) more(`under session grant ${p(e.grant_id)} (approvals grants)`);
      if (e.attempt_id) more(`used by attempt ${e.attempt_id}`);
      break;
  }
  return lines;
}

async function runTrailOfRun(store: Store, runId: string, json: boolean, paint: Paint): Promise<number> {
  const decisions = await store.listDecisions({ runId });
  if (json) {
    writeJson({ run_id: runId, decisions });
    return decisions.length === 0 ? 1 : 0;
  }
  if (decisions.length === 0) {
    process.stdout.write(`no decision recorded for run ${printable(runId)}\n`);
    return 1;
  }
  const out = [paint('bold', `run ${printable(runId)}: ${decisions.length} decision(s)`)];
  for (const d of decisions) out.push(...runLine(d, paint));
  process.stdout.write(`${out.join('\n')}\n`);
  return 0;
}

/** Wide enough for every verdict, `would_duplicate` (shadow mode) included. */
const VERDICT_COLUMN = 16;

function runLine(d: DecisionRecord, paint: Paint): string[] {
  const lines = [
    `${paint('dim', padEnd(d.createdAt, TIME))}${paint('bold', padEnd(d.verdict, VERDICT_COLUMN))}${printable(d.toolId)}${d.step ? `  step ${printable(d.step)}` : ''}`,
  ];
  const target =
    d.operationId === null
      ? d.reason
        ? `reason ${printable(d.reason)}`
        : null
      : d.verdict === 'duplicate' || d.verdict === 'would_duplicate'
        ? `duplicate of operation ${d.operationId}`
        : `operation ${d.operationId}${d.reason ? ` (${printable(d.reason)})` : ''}`;
  if (target !== null) lines.push(...wrap('', target, TIME));
  const shadow = shadowSummary({ verdict: d.verdict, shadow_dispatch: shadowDispatchEntry(d) });
  if (shadow !== null) lines.push(...wrap('', paint('yellow', shadow), TIME));
  return lines;
}
