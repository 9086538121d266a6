import { parseArgs } from 'node:util';
import { fullCounts, OPERATION_STATES, parseOperationFilter } from '../admin/index.js';
import {
  type OperationRecord,
  type OperationState,
  openInspectionStore,
  resolveStoreUrl,
} from '../store/index.js';
import { COLUMNS, flag, keyText, padEnd, printable, truncate, writeJson } from './cli-text.js';

const USAGE =
  'usage: effectgate operations [--state S] [--tool T] [--tenant T] [--since 24h|ISO] [--limit N] [--store URL] [--json]';

/**
 * `effectgate operations`: how many operations are in each state (same filters, any state), then
 * the operations themselves, two lines each (100 columns). `--state unknown` lists exactly the
 * operations whose outcome is unknown. `--json` prints `{ counts, operations }`.
 */
export async function runOperations(argv: readonly string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: {
      state: { type: 'string' },
      tool: { type: 'string' },
      tenant: { type: 'string' },
      since: { type: 'string' },
      limit: { type: 'string' },
      store: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
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
    const out: string[] = [countsLine(counts)];
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

function countsLine(counts: Record<OperationState, number>): string {
  return `states: ${OPERATION_STATES.map((s) => `${s} ${counts[s]}`).join('  ')}`;
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
