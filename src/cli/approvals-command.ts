import {
  type ApprovalAction,
  DEFAULT_APPROVAL_TTL,
  DEFAULT_GRANT_TTL,
  DEFAULT_LIST_LIMIT,
  parseApprovalDecision,
  parseApprovalState,
  parseLimit,
  parseName,
} from '../admin/index.js';
import { type ApprovalRecord, openInspectionStore, resolveStoreUrl } from '../store/index.js';
import { COLUMNS, flag, keyText, labelled, printable, truncate, writeJson } from './cli-text.js';
import { GRANT_USAGE, revokeGrant, runGrant, runGrants } from './grants-command.js';
import { type FlagTable, parseFlags } from './parse-flags.js';

export const USAGE = `usage: effectgate approvals list [--state S] [--limit N] [--store URL] [--json]
       effectgate approvals approve <id> --by WHO --reason TEXT [--ttl 1h|permanent] [--store URL] [--json]
       effectgate approvals deny <id> --by WHO --reason TEXT [--store URL] [--json]
       effectgate approvals revoke <id> --by WHO --reason TEXT [--store URL] [--json]
${GRANT_USAGE}
defaults: --limit ${DEFAULT_LIST_LIMIT}, approve --ttl ${DEFAULT_APPROVAL_TTL}, grant --ttl ${DEFAULT_GRANT_TTL}, --store DATABASE_URL else pglite:./.effectgate`;

export const LIST_OPTIONS = {
  state: { type: 'string' },
  limit: { type: 'string' },
  store: { type: 'string' },
  json: { type: 'boolean', default: false },
} as const satisfies FlagTable;

/** `deny` and `revoke`; `approve` adds `--ttl`. */
export const DECIDE_OPTIONS = {
  by: { type: 'string' },
  reason: { type: 'string' },
  store: { type: 'string' },
  json: { type: 'boolean', default: false },
} as const satisfies FlagTable;

export const APPROVE_OPTIONS = { ...DECIDE_OPTIONS, ttl: { type: 'string' } } as const satisfies FlagTable;

/**
 * `effectgate approvals`: list the approval cards, or approve/deny/revoke one. Approving allows
 * exactly one more attempt of the held operation, for `--ttl` (default 1h; `permanent` = no expiry).
 */
export async function runApprovals(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv;
  switch (sub) {
    case 'list':
      return list(rest);
    case 'approve':
    case 'deny':
    case 'revoke':
      return decide(sub, rest);
    case 'grant':
      return runGrant(rest, USAGE);
    case 'grants':
      return runGrants(rest, USAGE);
    default:
      process.stderr.write(`effectgate: unknown approvals command ${JSON.stringify(sub ?? '')}\n${USAGE}\n`);
      return 2;
  }
}

async function list(argv: readonly string[]): Promise<number> {
  const { values, positionals } = parseFlags(
    { args: [...argv], allowPositionals: true, options: LIST_OPTIONS },
    USAGE,
  );
  if (positionals.length > 0) {
    process.stderr.write(`effectgate: approvals list takes no arguments\n${USAGE}\n`);
    return 2;
  }
  const state =
    values.state === undefined ? undefined : flag(() => parseApprovalState('--state', values.state!));
  const limit =
    values.limit === undefined ? DEFAULT_LIST_LIMIT : flag(() => parseLimit('--limit', values.limit!));
  const store = await openInspectionStore(resolveStoreUrl(values.store));
  try {
    const approvals = await store.listApprovals({ ...(state === undefined ? {} : { state }), limit });
    if (values.json) {
      writeJson({ approvals });
      return 0;
    }
    const what = state === undefined ? 'approval(s)' : `${state} approval(s)`;
    const out = [approvals.length === 0 ? `no ${what}` : `${approvals.length} ${what}:`];
    for (const a of approvals) out.push('', ...approvalCard(a));
    process.stdout.write(`${out.join('\n')}\n`);
    return 0;
  } finally {
    await store.close();
  }
}

async function decide(action: ApprovalAction, argv: readonly string[]): Promise<number> {
  const { values, positionals } = parseFlags(
    {
      args: [...argv],
      allowPositionals: true,
      // One type for both: deny and revoke simply never see a --ttl.
      options: action === 'approve' ? APPROVE_OPTIONS : (DECIDE_OPTIONS as typeof APPROVE_OPTIONS),
    },
    USAGE,
  );
  const [id, ...extra] = positionals;
  const missing = [
    ...(id === undefined ? ['<id>'] : []),
    ...(values.by === undefined ? ['--by WHO'] : []),
    ...(values.reason === undefined ? ['--reason TEXT'] : []),
  ];
  if (missing.length > 0) {
    process.stderr.write(
      `effectgate: approvals ${action} needs ${missing.join(', ')} (who decides and why are recorded with the decision)\n${USAGE}\n`,
    );
    return 2;
  }
  if (extra.length > 0) {
    process.stderr.write(
      `effectgate: approvals ${action} takes one id, got ${positionals.length}\n${USAGE}\n`,
    );
    return 2;
  }
  const ttl = values.ttl;
  const input = flag(() =>
    parseApprovalDecision(
      parseName('approval id', id!),
      action,
      { by: values.by, reason: values.reason, ...(ttl === undefined ? {} : { ttl }) },
      (field) => `--${field}`,
    ),
  );
  const store = await openInspectionStore(resolveStoreUrl(values.store));
  let grant = false;
  try {
    // Not a card but a session grant's id (approvals grant): revoke ends that too.
    grant =
      action === 'revoke' &&
      (await store.getApproval(input.approvalId)) === null &&
      (await store.listGrants({ grantId: input.approvalId })).length > 0;
    if (!grant) {
      const approval = await store.decideApproval(input);
      if (values.json) writeJson(approval);
      else process.stdout.write(`${describeDecision(action, approval).join('\n')}\n`);
      return 0;
    }
  } finally {
    await store.close();
  }
  return revokeGrant(input.approvalId, { by: values.by, reason: values.reason }, values.store, values.json);
}

/** What a recorded decision means, then the card it left: the command's output, and the demo's. */
export function describeDecision(action: ApprovalAction, a: ApprovalRecord): string[] {
  return [decisionSummary(action, a), '', ...approvalCard(a)];
}

function decisionSummary(action: ApprovalAction, a: ApprovalRecord): string {
  const id = printable(a.id);
  if (action === 'approve') {
    const until = a.expiresAt === null ? 'with no expiry' : `until ${printable(a.expiresAt)}`;
    return `approved ${id}: one retry of operation ${printable(a.operationId)} may start ${until}`;
  }
  if (action === 'deny') return `denied ${id}: operation ${printable(a.operationId)} stays held`;
  return `revoked ${id}: the approved retry of operation ${printable(a.operationId)} may no longer start`;
}

/** One approval card: intent, previous dispatch state, planned recovery, and who decided what when. */
export function approvalCard(a: ApprovalRecord): string[] {
  const i = a.intent;
  const previous = [
    a.previousDispatchState ?? 'no attempt yet',
    ...(a.previousStatus === null ? [] : [`status ${a.previousStatus}`]),
    ...(a.previousAttemptId === null ? [] : [`attempt ${printable(a.previousAttemptId)}`]),
  ].join(', ');
  const decided =
    a.decidedAt === null
      ? 'not yet'
      : `${printable(a.decidedBy ?? '?')} at ${printable(a.decidedAt)}: ${oneLine(a.reason ?? '')}`;
  const expires =
    a.expiresAt !== null
      ? printable(a.expiresAt)
      : a.decidedAt !== null && a.state !== 'denied'
        ? 'never'
        : '-';
  const lines = [
    `approval ${printable(a.id)}  ${a.state}`,
    ...labelled(
      'operation',
      `${printable(a.operationId)}  ${printable(i.toolId)}  ${printable(`${i.scope.tenant}/${i.scope.area}/${i.scope.agent}`)}`,
    ),
    ...labelled('intent', printable(`${i.method} ${i.host} ${i.path}`)),
    ...labelled('key', truncate(keyText(i.keyValues), COLUMNS - 13)),
    ...labelled('previous', previous),
    ...labelled('fingerprint', `${printable(i.fingerprint)} (the attempt whose outcome is unknown)`),
    ...labelled('request', requestLine(a)),
    ...labelled('recovery', oneLine(a.plannedRecovery)),
    ...labelled('requested', `${printable(a.requestedAt)} by ${printable(a.requestedBy)}`),
    ...labelled('decided', decided),
    ...labelled('expires', expires),
  ];
  if (a.revokedAt !== null) {
    lines.push(...labelled('revoked', `${printable(a.revokedBy ?? '?')} at ${printable(a.revokedAt)}`));
  }
  if (a.grantId !== null)
    lines.push(...labelled('grant', `${printable(a.grantId)} (a session grant of the run)`));
  if (a.usedAt !== null) {
    lines.push(
      ...labelled('used', `by attempt ${printable(a.usedByAttemptId ?? '?')} at ${printable(a.usedAt)}`),
    );
  }
  return lines;
}

/** The request the card lets go (its fingerprint): the lost attempt's, or a change. */
function requestLine(a: ApprovalRecord): string {
  const r = a.intent.requestFingerprint;
  if (r === null) return 'not recorded (a card from before migration 0011): it lets no request go';
  if (r === a.intent.fingerprint) return 'the same request (approving lets only it go)';
  return `CHANGED: ${printable(r)} (same key values, another request; approving lets only it go)`;
}

function oneLine(text: string): string {
  return printable(text.replace(/\s*\n\s*/g, ' / ').replace(/\t/g, ' '));
}
