import {
  DEFAULT_LIST_LIMIT,
  parseDecidedBy,
  parseDecisionReason,
  parseGrant,
  parseLimit,
  parseName,
} from '../admin/index.js';
import { type GrantRecord, openInspectionStore, resolveStoreUrl } from '../store/index.js';
import { flag, labelled, printable, writeJson } from './cli-text.js';
import { type FlagTable, parseFlags } from './parse-flags.js';

export const GRANT_USAGE = `       effectgate approvals grant --run RUN [--tool T] [--tenant T --area A --agent G] --by WHO --reason TEXT [--ttl 30m] [--store URL] [--json]
       effectgate approvals grants [--run RUN] [--limit N] [--store URL] [--json]
       effectgate approvals revoke <grant-id> --by WHO --reason TEXT [--store URL] [--json]`;

export const GRANT_OPTIONS = {
  run: { type: 'string' },
  tool: { type: 'string' },
  tenant: { type: 'string' },
  area: { type: 'string' },
  agent: { type: 'string' },
  by: { type: 'string' },
  reason: { type: 'string' },
  ttl: { type: 'string' },
  store: { type: 'string' },
  json: { type: 'boolean', default: false },
} as const satisfies FlagTable;

export const GRANTS_OPTIONS = {
  run: { type: 'string' },
  limit: { type: 'string' },
  store: { type: 'string' },
  json: { type: 'boolean', default: false },
} as const satisfies FlagTable;

/**
 * `effectgate approvals grant`: lets one run retry unknown operations of a tool (or of every tool)
 * for `--ttl` (default 30m) without a card per call, for a batch recovery (docs/design.md
 * §3 "Approvals"). Each retry made under it still gets its card, used under the grant.
 */
export async function runGrant(argv: readonly string[], usage: string): Promise<number> {
  const { values, positionals } = parseFlags(
    { args: [...argv], allowPositionals: true, options: GRANT_OPTIONS },
    usage,
  );
  const missing = [
    ...(values.run === undefined ? ['--run RUN'] : []),
    ...(values.by === undefined ? ['--by WHO'] : []),
    ...(values.reason === undefined ? ['--reason TEXT'] : []),
  ];
  if (missing.length > 0 || positionals.length > 0) {
    process.stderr.write(
      `effectgate: approvals grant ${missing.length > 0 ? `needs ${missing.join(', ')} (who grants what to which run, and why, are recorded)` : 'takes no positional arguments'}\n${usage}\n`,
    );
    return 2;
  }
  const { store: storeFlag, json, ...raw } = values;
  const input = flag(() => parseGrant(raw, (field) => `--${field}`));
  const store = await openInspectionStore(resolveStoreUrl(storeFlag));
  try {
    const grant = await store.createGrant(input);
    if (json) writeJson(grant);
    else
      process.stdout.write(
        `${[`granted ${printable(grant.id)}: run ${printable(grant.runId)} may retry unknown operations of ${grant.toolId === null ? 'every tool' : printable(grant.toolId)} until ${printable(grant.expiresAt)}`, '', ...grantCard(grant)].join('\n')}\n`,
      );
    return 0;
  } finally {
    await store.close();
  }
}

export async function runGrants(argv: readonly string[], usage: string): Promise<number> {
  const { values, positionals } = parseFlags(
    { args: [...argv], allowPositionals: true, options: GRANTS_OPTIONS },
    usage,
  );
  if (positionals.length > 0) {
    process.stderr.write(`effectgate: approvals grants takes no arguments\n${usage}\n`);
    return 2;
  }
  const runId = values.run === undefined ? undefined : flag(() => parseName('--run', values.run!));
  const limit =
    values.limit === undefined ? DEFAULT_LIST_LIMIT : flag(() => parseLimit('--limit', values.limit!));
  const store = await openInspectionStore(resolveStoreUrl(values.store));
  try {
    const grants = await store.listGrants({ ...(runId === undefined ? {} : { runId }), limit });
    if (values.json) writeJson({ grants });
    else {
      const out = [grants.length === 0 ? 'no grants' : `${grants.length} grant(s):`];
      for (const g of grants) out.push('', ...grantCard(g));
      process.stdout.write(`${out.join('\n')}\n`);
    }
    return 0;
  } finally {
    await store.close();
  }
}

/** `approvals revoke <id>` for an id that is a grant's. */
export async function revokeGrant(
  id: string,
  raw: { readonly by: unknown; readonly reason: unknown },
  storeUrl: string | undefined,
  json: boolean,
): Promise<number> {
  const input = flag(() => ({
    grantId: parseName('grant id', id),
    by: parseDecidedBy('--by', raw.by),
    reason: parseDecisionReason('--reason', raw.reason),
  }));
  const store = await openInspectionStore(resolveStoreUrl(storeUrl));
  try {
    const grant = await store.revokeGrant(input);
    if (json) writeJson(grant);
    else
      process.stdout.write(
        `${[`revoked grant ${printable(grant.id)}: run ${printable(grant.runId)} may no longer retry unknown operations without an approval`, '', ...grantCard(grant)].join('\n')}\n`,
      );
    return 0;
  } finally {
    await store.close();
  }
}

export function grantCard(g: GrantRecord): string[] {
  return [
    `grant ${printable(g.id)}  ${g.state}`,
    ...labelled(
      'run',
      `${printable(g.runId)}  ${printable(`${g.scope.tenant}/${g.scope.area}/${g.scope.agent}`)}`,
    ),
    ...labelled('tool', g.toolId === null ? 'every tool' : printable(g.toolId)),
    ...labelled('granted', `${printable(g.grantedAt)} by ${printable(g.grantedBy)}: ${printable(g.reason)}`),
    ...labelled('expires', printable(g.expiresAt)),
    ...(g.revokedAt === null
      ? []
      : labelled(
          'revoked',
          `${printable(g.revokedAt)} by ${printable(g.revokedBy ?? '?')}: ${printable(g.revokeReason ?? '')}`,
        )),
  ];
}
