import { parsePositiveDuration } from '../admin/index.js';
import { unknownRules } from '../engine/index.js';
import { loadPolicies } from '../policy/index.js';
import {
  openInspectionStore,
  type RecoveredAttempt,
  resolveStoreUrl,
  type UnknownRule,
} from '../store/index.js';
import { flag, printable, writeJson } from './cli-text.js';
import { type FlagTable, parseFlags } from './parse-flags.js';

export const USAGE = `usage: effectgate recover [--policies DIR] [--stale-after 30s] [--store URL] [--json]
defaults: --stale-after 30s, --store DATABASE_URL else pglite:./.effectgate, --policies none (needed only for operations older than migration 0003)`;

export const RECOVER_OPTIONS = {
  policies: { type: 'string' },
  'stale-after': { type: 'string', default: '30s' },
  store: { type: 'string' },
  json: { type: 'boolean', default: false },
} as const satisfies FlagTable;

/** What happens next to a recovered operation, by the tool's unknown rule. */
const PLAN: Readonly<Record<UnknownRule, string>> = {
  honored: 'retried with the same idempotency key on the next proposal',
  reconcile:
    "looked up at the destination on the next proposal (with that proposal's credentials; the gate stores none)",
  hold: "held for an operator's approval on the next proposal",
};

/**
 * `effectgate recover`: crash recovery without a running gate. Every attempt persisted without an
 * outcome whose gate is gone (on an embedded store: every one, the directory lock proves no gate
 * runs) is marked `sent_no_response`, its operation `unknown`; tools that need an operator get an
 * approval request. Prints what was recovered and what happens next to each; exit 0.
 */
export async function runRecover(argv: readonly string[]): Promise<number> {
  const { values, positionals } = parseFlags(
    { args: [...argv], allowPositionals: true, options: RECOVER_OPTIONS },
    USAGE,
  );
  if (positionals.length > 0) {
    process.stderr.write(
      `effectgate: recover takes no arguments, got ${JSON.stringify(positionals[0])}\n${USAGE}\n`,
    );
    return 2;
  }
  const staleAfterMs = flag(() => parsePositiveDuration('--stale-after', values['stale-after']));
  // Each operation carries its tool's unknown rule (recorded when it was created), so no policies
  // are needed. --policies only names rules for operations recorded before that (migration 0003);
  // loaded before the store is opened, so an invalid folder fails before anything changes.
  const rules =
    values.policies === undefined ? {} : unknownRules((await loadPolicies(values.policies)).tools);
  const store = await openInspectionStore(resolveStoreUrl(values.store));
  try {
    const recovered = await store.recover({
      instanceId: null,
      exclusive: store.kind === 'pglite',
      staleAfterMs,
      rules,
    });
    const rows = recovered.map((r) => ({ ...r, plan: planOf(r) }));
    if (values.json) {
      writeJson({ recovered: rows, count: rows.length });
      return 0;
    }
    const out: string[] = [];
    for (const r of rows) {
      out.push(
        `operation ${printable(r.operationId)}  attempt ${printable(r.attemptId)}  ${printable(r.toolId)}`,
        `    outcome unknown (gate gone mid-dispatch); ${r.plan}`,
      );
    }
    out.push(summary(rows));
    process.stdout.write(`${out.join('\n')}\n`);
    return 0;
  } finally {
    await store.close();
  }
}

function planOf(r: RecoveredAttempt): string {
  if (r.approvalId !== null) return `approval ${printable(r.approvalId)} requested`;
  return PLAN[r.rule];
}

function summary(
  rows: readonly { readonly approvalId: string | null; readonly rule: UnknownRule }[],
): string {
  if (rows.length === 0) return 'nothing to recover: every persisted attempt has an outcome or a live gate';
  const approvals = rows.filter((r) => r.approvalId !== null).length;
  const honored = rows.filter((r) => r.approvalId === null && r.rule === 'honored').length;
  const reconcile = rows.filter((r) => r.approvalId === null && r.rule === 'reconcile').length;
  const parts = [
    ...(honored > 0 ? [`${honored} to retry with the same key`] : []),
    ...(reconcile > 0 ? [`${reconcile} to look up first`] : []),
    ...(approvals > 0 ? [`${approvals} approval request(s)`] : []),
  ];
  return `${rows.length} attempt(s) recovered, their operations now unknown${parts.length > 0 ? `: ${parts.join(', ')}` : ''}`;
}
