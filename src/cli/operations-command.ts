import {
  DEFAULT_LIST_LIMIT,
  fullCounts,
  OPERATION_STATES,
  parseName,
  parseOperationFilter,
  parseResolution,
} from '../admin/index.js';
import {
  type ObservationResult,
  type OperationRecord,
  type OperationState,
  openInspectionStore,
  resolveStoreUrl,
} from '../store/index.js';
import { COLUMNS, flag, keyText, padEnd, printable, truncate, writeJson } from './cli-text.js';
import { type FlagTable, parseFlags } from './parse-flags.js';

export const USAGE = `usage: effectgate operations [--state S] [--tool T] [--tenant T] [--since 24h|ISO] [--limit N] [--store URL] [--json]
       effectgate operations resolve <id> --as succeeded|failed|duplicate_effect_confirmed --by WHO --reason TEXT [--ref URL ...] [--store URL] [--json]
defaults: --limit ${DEFAULT_LIST_LIMIT}, --store DATABASE_URL else pglite:./.effectgate`;

export const LIST_OPTIONS = {
  state: { type: 'string' },
  tool: { type: 'string' },
  tenant: { type: 'string' },
  since: { type: 'string' },
  limit: { type: 'string' },
  store: { type: 'string' },
  json: { type: 'boolean', default: false },
} as const satisfies FlagTable;

export const RESOLVE_OPTIONS = {
  as: { type: 'string' },
  by: { type: 'string' },
  reason: { type: 'string' },
  ref: { type: 'string', multiple: true },
  store: { type: 'string' },
  json: { type: 'boolean', default: false },
} as const satisfies FlagTable;

/**
 * `effectgate operations`: how many operations are in each state (same filters, any state), then
 * the operations themselves, two lines each (100 columns). `--state unknown` lists exactly the
 * operations whose outcome is unknown. `--json` prints `{ counts, operations }`.
 */
export async function runOperations(argv: readonly string[]): Promise<number> {
  if (argv[0] === 'resolve') return runResolve(argv.slice(1));
  const { values, positionals } = parseFlags(
    { args: [...argv], allowPositionals: true, options: LIST_OPTIONS },
    USAGE,
  );
  if (positionals.length > 0) {
    process.stderr.write(
      `effectgate: operations takes no arguments, got ${JSON.stringify(positionals[0])}\n${USAGE}\n`,
    );
    return 2;
  }
  const filter = flag(() => parseOperationFilter(values, (field) => `--${field}`));
  const { state: _state, limit: _limit, ...countFilter } = filter;
  const store = await openInspectionStore(resolveStoreUrl(values.store));
  try {
    const counts = fullCounts(await store.countOperations(countFilter));
    const operations = await store.listOperations(filter);
    if (values.json) {
      writeJson({ counts, operations });
      return 0;
    }
    const out: string[] = countsLines(counts);
    const total =
      filter.state === undefined ? Object.values(counts).reduce((a, b) => a + b, 0) : counts[filter.state];
    const what = filter.state === undefined ? 'operation(s)' : `${filter.state} operation(s)`;
    out.push(
      operations.length === 0
        ? `no ${what} match`
        : `${operations.length} of ${total} ${what}${operations.length < total ? ` (--limit ${filter.limit})` : ''}:`,
    );
    for (const op of operations) out.push('', ...operationLines(op));
    process.stdout.write(`${out.join('\n')}\n`);
    return 0;
  } finally {
    await store.close();
  }
}

/**
 * `effectgate operations resolve <id>`: an operator who checked the destination settles an
 * unknown operation with that evidence (docs/design.md §3 "Observations", §4.4). Appends an
 * operator_decision observation; the key follows (succeeded and duplicate_effect_confirmed confirm
 * it, failed releases it for a retry of the same operation); open approval requests are withdrawn;
 * no attempt is edited.
 */
async function runResolve(argv: readonly string[]): Promise<number> {
  const { values, positionals } = parseFlags(
    { args: [...argv], allowPositionals: true, options: RESOLVE_OPTIONS },
    USAGE,
  );
  const [id, ...extra] = positionals;
  const missing = [
    ...(id === undefined ? ['<id>'] : []),
    ...(values.as === undefined ? ['--as succeeded|failed|duplicate_effect_confirmed'] : []),
    ...(values.by === undefined ? ['--by WHO'] : []),
    ...(values.reason === undefined ? ['--reason TEXT'] : []),
  ];
  if (missing.length > 0) {
    process.stderr.write(
      `effectgate: operations resolve needs ${missing.join(', ')} (what you found, who you are and why are recorded with the decision)\n${USAGE}\n`,
    );
    return 2;
  }
  if (extra.length > 0) {
    process.stderr.write(
      `effectgate: operations resolve takes one id, got ${positionals.length}\n${USAGE}\n`,
    );
    return 2;
  }
  const input = flag(() =>
    parseResolution(
      parseName('operation id', id!),
      { as: values.as, by: values.by, reason: values.reason, ref: values.ref },
      'cli',
      (field) => `--${field}`,
    ),
  );
  const store = await openInspectionStore(resolveStoreUrl(values.store));
  try {
    const result = await store.addObservation(input);
    if (values.json) writeJson(result);
    else process.stdout.write(`${resolutionLines(result).join('\n')}\n`);
    return 0;
  } finally {
    await store.close();
  }
}

/** What a resolution did, in words. */
export function resolutionLines(r: ObservationResult): string[] {
  const change = r.stateChange === null ? r.operationState : `${r.stateChange.from} -> ${r.stateChange.to}`;
  const lines = [
    `resolved ${printable(r.operationId)}: ${change} (observation ${printable(r.observationId)})`,
  ];
  if (r.key?.state === 'confirmed') {
    const until =
      r.key.windowEndsAt == null
        ? 'with no end (a permanent window)'
        : `until ${printable(r.key.windowEndsAt)}`;
    lines.push(`  key confirmed ${until}: a repeat of this effect is answered as its duplicate`);
  } else if (r.key?.state === 'released') {
    lines.push(
      '  key released: the next proposal of it is a retry of this operation, with the same idempotency key',
    );
  }
  if (r.approvalsWithdrawn > 0)
    lines.push(`  ${r.approvalsWithdrawn} approval(s) withdrawn: nothing is left to approve`);
  return lines;
}

/** Every state with its count, packed into lines of at most `COLUMNS` (a state never splits from its count). */
function countsLines(counts: Record<OperationState, number>): string[] {
  const lines: string[] = [];
  let line = 'states:';
  for (const part of OPERATION_STATES.map((s) => `${s} ${counts[s]}`)) {
    if (line.length + 2 + part.length > COLUMNS) {
      lines.push(line);
      line = `       ${part}`;
    } else line = line === 'states:' ? `${line} ${part}` : `${line}  ${part}`;
  }
  lines.push(line);
  return lines;
}

/**
 * Line 1: id, state, tool, attempts. Line 2 (indented): scope, created at, key values (cut to fit).
 */
export function operationLines(op: OperationRecord): [string, string] {
  const attempts = `${op.attempts.length} attempt${op.attempts.length === 1 ? '' : 's'}`;
  const head = `${printable(op.id)}  ${padEnd(op.state, 9)}  `;
  const toolRoom = Math.max(12, COLUMNS - head.length - attempts.length - 2);
  const first = `${head}${padEnd(truncate(printable(op.toolId), toolRoom), Math.min(toolRoom, 20))}  ${attempts}`;
  const scope = truncate(printable(`${op.scope.tenant}/${op.scope.area}/${op.scope.agent}`), 40);
  const start = `    ${scope}  created ${printable(op.createdAt)}  key `;
  const second = `${start}${truncate(keyText(op.keyValues), Math.max(8, COLUMNS - start.length))}`;
  return [first, second];
}
