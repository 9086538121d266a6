import { DEFAULT_LIST_LIMIT, parseLimit, parseRunRelease } from '../admin/index.js';
import { openInspectionStore, type RunRecord, resolveStoreUrl } from '../store/index.js';
import { flag, labelled, printable, writeJson } from './cli-text.js';
import { type FlagTable, parseFlags } from './parse-flags.js';

export const USAGE = `usage: effectgate runs [list] [--halted] [--limit N] [--store URL] [--json]
       effectgate runs release <run-id> --by WHO --reason TEXT [--tenant T --area A --agent G] [--store URL] [--json]
(a run's page, with its decisions, halts and releases: /ui/runs/<run-id>)`;

export const RUNS_LIST_OPTIONS = {
  halted: { type: 'boolean', default: false },
  limit: { type: 'string' },
  store: { type: 'string' },
  json: { type: 'boolean', default: false },
} as const satisfies FlagTable;

export const RELEASE_OPTIONS = {
  tenant: { type: 'string' },
  area: { type: 'string' },
  agent: { type: 'string' },
  by: { type: 'string' },
  reason: { type: 'string' },
  store: { type: 'string' },
  json: { type: 'boolean', default: false },
} as const satisfies FlagTable;

/**
 * `effectgate runs`: the runs the loop breaker knows (halted first), and `runs release`, which
 * lets a halted run go on. Who released it and why are recorded; its halt stays
 * in the trail.
 */
export async function runRuns(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub.startsWith('-')) return list(argv);
  switch (sub) {
    case 'list':
      return list(rest);
    case 'release':
      return release(rest);
    default:
      process.stderr.write(`effectgate: unknown runs command ${JSON.stringify(sub)}\n${USAGE}\n`);
      return 2;
  }
}

async function list(argv: readonly string[]): Promise<number> {
  const { values, positionals } = parseFlags(
    { args: [...argv], allowPositionals: true, options: RUNS_LIST_OPTIONS },
    USAGE,
  );
  if (positionals.length > 0) {
    process.stderr.write(`effectgate: runs list takes no arguments\n${USAGE}\n`);
    return 2;
  }
  const limit =
    values.limit === undefined ? DEFAULT_LIST_LIMIT : flag(() => parseLimit('--limit', values.limit!));
  const store = await openInspectionStore(resolveStoreUrl(values.store));
  try {
    const runs = await store.listRuns({ ...(values.halted ? { halted: true } : {}), limit });
    if (values.json) writeJson({ runs });
    else {
      const halted = runs.filter((r) => r.haltedAt !== null).length;
      const out = [
        runs.length === 0
          ? values.halted
            ? 'no halted runs'
            : 'no run has a duplicate skip recorded'
          : `${runs.length} run(s), ${halted} halted:`,
      ];
      for (const r of runs) out.push('', ...runCard(r));
      process.stdout.write(`${out.join('\n')}\n`);
    }
    return 0;
  } finally {
    await store.close();
  }
}

async function release(argv: readonly string[]): Promise<number> {
  const { values, positionals } = parseFlags(
    { args: [...argv], allowPositionals: true, options: RELEASE_OPTIONS },
    USAGE,
  );
  const missing = [
    ...(positionals.length === 0 ? ['<run-id>'] : []),
    ...(values.by === undefined ? ['--by WHO'] : []),
    ...(values.reason === undefined ? ['--reason TEXT'] : []),
  ];
  if (missing.length > 0 || positionals.length > 1) {
    process.stderr.write(
      `effectgate: runs release ${missing.length > 0 ? `needs ${missing.join(', ')} (who let the run go on, and why, are recorded)` : 'takes one run id'}\n${USAGE}\n`,
    );
    return 2;
  }
  const { store: storeFlag, json, ...raw } = values;
  const input = flag(() => parseRunRelease(positionals[0]!, raw, (field) => `--${field}`));
  const store = await openInspectionStore(resolveStoreUrl(storeFlag));
  try {
    const run = await store.releaseRun(input);
    if (json) writeJson(run);
    else
      process.stdout.write(
        `${[`released run ${printable(run.id)}: its next governed call is decided as usual, its duplicate counts start again`, '', ...runCard(run)].join('\n')}\n`,
      );
    return 0;
  } finally {
    await store.close();
  }
}

export function runCard(r: RunRecord): string[] {
  const last = r.releases.at(-1);
  return [
    `run ${printable(r.id)}  ${r.haltedAt === null ? 'running' : 'HALTED'}`,
    ...labelled('scope', printable(`${r.scope.tenant}/${r.scope.area}/${r.scope.agent}`)),
    ...labelled('duplicates', `${r.duplicateSkips} skipped since ${printable(r.firstSkipAt)}`),
    ...(r.haltedAt === null
      ? []
      : labelled('halted', `${printable(r.haltedAt)} by decision ${printable(r.haltDecisionId ?? '?')}`)),
    ...(last === undefined
      ? []
      : labelled(
          'released',
          `${printable(last.releasedAt)} by ${printable(last.releasedBy)}: ${printable(last.reason)}${r.releases.length > 1 ? ` (${r.releases.length} releases)` : ''}`,
        )),
  ];
}
