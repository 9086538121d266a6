/**
 * Writes docs/RELIABILITY.md from the fault suite's result rows.
 *
 *   node --import tsx scripts/reliability.ts --run         # long variant of test/fault, then the doc
 *   node --import tsx scripts/reliability.ts --run short   # the short variant (what npm test runs)
 *   node --import tsx scripts/reliability.ts               # the doc from the rows already there
 *
 * Every fault test writes one row per (case, store) to test-artifacts/fault-results/; this script
 * merges them into test-artifacts/fault-results.json and renders the table. A case of the
 * catalogue (test/fault/fault-cases.ts) without a row is listed as not run, never dropped. With
 * `--run` the exit code is the test run's, so a broken promise fails the command that documents
 * it. The CLI cases need a build: `npm run build` first (the npm script does).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { FAULT_CASES, type FaultResult, RESULTS_DIR, type StoreKind } from '../test/fault/fault-cases.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const DOC = `${ROOT}docs/RELIABILITY.md`;
const MERGED = `${ROOT}test-artifacts/fault-results.json`;
const STORES: readonly StoreKind[] = ['pglite', 'postgres'];
const STORE_NAME: Record<StoreKind, string> = { pglite: 'PGlite', postgres: 'PostgreSQL' };

function main(argv: readonly string[]): number {
  const runAt = argv.indexOf('--run');
  let exit = 0;
  let variant: 'short' | 'long' | null = null;
  if (runAt >= 0) {
    variant = argv[runAt + 1] === 'short' ? 'short' : 'long';
    exit = runSuite(variant);
  }
  const rows = readRows();
  writeFileSync(MERGED, `${JSON.stringify(rows, null, 2)}\n`);
  mkdirSync(`${ROOT}docs`, { recursive: true });
  writeFileSync(DOC, render(rows));
  const failed = rows.filter((r) => r.result === 'fail').length;
  process.stdout.write(
    `docs/RELIABILITY.md: ${rows.length} result row(s), ${failed} failing${variant === null ? '' : ` (${variant} variant run, exit ${exit})`}\n`,
  );
  return exit;
}

/** Runs test/fault with the variant's environment after clearing old rows; returns vitest's exit code. */
function runSuite(variant: 'short' | 'long'): number {
  rmSync(RESULTS_DIR, { recursive: true, force: true });
  if (process.env['DATABASE_URL'] === undefined) {
    process.stderr.write(
      'DATABASE_URL is not set: the PostgreSQL cases (every relay case) will be skipped.\n',
    );
  }
  const vitest = `${ROOT}node_modules/vitest/vitest.mjs`;
  const r = spawnSync(process.execPath, [vitest, 'run', 'test/fault'], {
    cwd: ROOT,
    stdio: 'inherit',
    env: { ...process.env, EFFECTGATE_FAULTS: variant },
  });
  return r.status ?? 1;
}

function readRows(): FaultResult[] {
  if (!existsSync(RESULTS_DIR)) return [];
  const order = new Map(FAULT_CASES.map((c, i) => [c.id, i]));
  return readdirSync(RESULTS_DIR)
    .filter((f) => f.endsWith('.json'))
    .map((f) => JSON.parse(readFileSync(`${RESULTS_DIR}${f}`, 'utf8')) as FaultResult)
    .sort(
      (a, b) =>
        (order.get(a.case) ?? 99) - (order.get(b.case) ?? 99) ||
        STORES.indexOf(a.store) - STORES.indexOf(b.store),
    );
}

function gitRevision(): string {
  const head = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' });
  if (head.status !== 0) return 'unknown';
  const dirty = spawnSync('git', ['status', '--porcelain', '--', 'src'], { cwd: ROOT, encoding: 'utf8' });
  return `${head.stdout.trim()}${dirty.stdout.trim() === '' ? '' : ' + uncommitted changes in src/'}`;
}

/** Table cells hold no pipes or line breaks. */
function cell(text: string | number): string {
  return String(text).replaceAll('|', '\\|').replaceAll('\n', ' ');
}

function render(rows: readonly FaultResult[]): string {
  const variants = [...new Set(rows.map((r) => r.variant))];
  const lines: string[] = [];
  const table: string[] = [
    '| case | fault injected | promise | store | keys | performed twice | holds | unknowns | attempts without outcome | result |',
    '|---|---|---|---|--:|--:|--:|--:|--:|---|',
  ];
  const details: string[] = [];
  const notes: string[] = [];
  for (const c of FAULT_CASES) {
    // A store the case cannot apply to gets a footnote, not an empty row.
    const other = STORES.filter((s) => !c.stores.includes(s));
    let mark = '';
    if (other.length > 0) {
      const note = `${other.map((s) => STORE_NAME[s]).join(', ')}: not applicable (${c.notOn ?? 'not covered'}).`;
      if (!notes.includes(note)) notes.push(note);
      mark = `<sup>${notes.indexOf(note) + 1}</sup>`;
    }
    for (const store of c.stores) {
      const row = rows.find((r) => r.case === c.id && r.store === store);
      if (row === undefined) {
        table.push(
          `| \`${c.id}\` | ${cell(c.fault)} | ${cell(c.promise)} | ${STORE_NAME[store]}${mark} | | | | | | not run |`,
        );
        continue;
      }
      const f = row.figures;
      table.push(
        `| \`${c.id}\` | ${cell(row.fault)} | ${cell(row.promise)} | ${STORE_NAME[store]}${mark} | ${f.keys} | ${f.performedTwice} | ${f.holds} | ${f.unknowns} | ${f.attemptsWithoutOutcome} | ${row.result === 'pass' ? '**pass**' : '**FAIL**'} |`,
      );
      const answers = Object.entries(row.answers)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, n]) => `${k} ×${n}`)
        .join(', ');
      details.push(
        `- \`${c.id}\` on ${STORE_NAME[store]} (${row.variant}, ${(row.durationMs / 1000).toFixed(1)} s): ` +
          `${f.performed} of ${f.keys} keys performed (${f.effects} effects, ${f.replays} replays), ` +
          `${f.operations} operations, ${f.attempts} attempts, chain ${f.chainVerifies ? 'verifies' : 'BROKEN'}; ` +
          `answers: ${answers === '' ? 'none' : answers}.`,
      );
      for (const failure of row.failures) details.push(`  - ✗ ${failure}`);
    }
  }
  const finished = rows.map((r) => r.finishedAt).sort();
  lines.push(
    '# Reliability under faults',
    '',
    '<!-- Generated by `npm run faults` (scripts/reliability.ts) from the rows test/fault writes. Do not edit by hand. -->',
    '',
    "effectgate promises that an agent's effect is never performed twice because of a fault between the",
    'gate, its store and the destination, and that the trail says honestly what happened',
    '([design](design.md) §2, §3, §4.1). This page is the measured evidence: each case injects one',
    "fault, then the destination's own ledger is compared with the trail, Jepsen style.",
    '',
    '## How it is measured',
    '',
    '- **Store faults**: the gate reaches PostgreSQL through a loopback TCP relay the test owns',
    '  (test/fault/tcp-relay.ts) and cuts: down before decide, decide committed with its answer cut,',
    '  down while the call is at the destination, `recordOutcome` dropped or committed with its answer',
    '  cut, and flapping under 16 concurrent agents. PGlite is embedded in the gate process, so these',
    '  cases apply to PostgreSQL only.',
    '- **Gate faults**: the built CLI is SIGKILLed with calls in flight and restarted at once with the',
    '  same `--instance-id` (both stores), or killed while the store is down past `pending_ttl`.',
    '- **Destination faults**: the destination performs the effect and drops the connection.',
    '- **The destination** (test/fault/ledger-destination.ts) keeps its own ledger. Three tools, one',
    '  per unknown-outcome rule: `honored` (honours `Idempotency-Key`: a replay is not an effect),',
    '  `reconciled` (can be looked up), `held` (neither). `pending_ttl` is 1 s so lost reservations',
    '  expire inside the run.',
    '- **The checker** (test/fault/ledger-check.ts), after a graceful stop with the store back:',
    '  1. every key performed at most once by the destination;',
    '  2. every attempt has a dispatch state;',
    '  3. every effect performed belongs to an operation of the trail, same tool and key, that is',
    '     `succeeded`, `unknown` or `duplicate_effect_confirmed` (never `failed`, never missing);',
    '  4. `unknown` only where an attempt is `sent_no_response`, and not where the destination',
    '     answered a gate that stayed alive;',
    '  5. the destination never saw more requests of an operation than the trail has sent attempts,',
    '     and every `succeeded` operation was performed;',
    '  6. the hash chain verifies.',
    '',
    'Columns: **keys** proposed; **performed twice** keys the destination performed more than once;',
    '**holds** operations with an approval request (held for a person: safe, not done);',
    '**unknowns** operations left `unknown`; **attempts without outcome** after the graceful stop.',
    '',
    '## Results',
    '',
    `Variant: ${variants.length === 0 ? 'none run yet' : variants.join(', ')} · revision ${gitRevision()} · ` +
      `node ${process.version}, ${availableParallelism()} cores · ` +
      `${finished.length === 0 ? 'no rows' : `finished ${finished[finished.length - 1]}`}`,
    '',
    ...table,
    '',
    ...notes.map((n, i) => `<sup>${i + 1}</sup> ${n}`),
    '',
    '### Details',
    '',
    ...(details.length === 0 ? ['No result rows: run `npm run faults`.'] : details),
    '',
    '## Regenerate',
    '',
    '```sh',
    'DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npm run faults   # long variant (EFFECTGATE_FAULTS=long)',
    'DATABASE_URL=… npm run faults:short                                   # the variant npm test runs',
    '```',
    '',
    'Without `DATABASE_URL` the PostgreSQL rows read "not run". `npm test` runs the short variant and',
    'leaves its rows in test-artifacts/fault-results/; `node --import tsx scripts/reliability.ts`',
    'renders them without running anything.',
    '',
  );
  return lines.join('\n');
}

process.exitCode = main(process.argv.slice(2));
