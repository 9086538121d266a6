/**
 * The SQLSTATEs the store can raise, held against the one table that says which are transient
 * (src/store/store-sqlstates.ts) and against what the outcome outbox does with them. A refusal the
 * table calls transient must be retried by the outbox, never dropped: an outcome the agent was told
 * waits in the outbox must reach the store once the moment passes. The store's source is read to
 * find every SQLSTATE it mentions, raises (`using errcode`, a bare `raise exception`) or provokes
 * (`lock_timeout`, `statement_timeout`, `nowait`, deadlocks, serialization): each must have an
 * entry of its own, so adding one without deciding whether it is transient fails here.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { StoreError } from '../../../src/errors.js';
import {
  isTransientSqlstate,
  isTransientStoreFailure,
  STORE_SQLSTATES,
  sqlstateRule,
} from '../../../src/store/index.js';
import {
  FUNCTION_REFUSALS,
  functionRefusal,
  type RefusingFunction,
} from '../../../src/store/store-sqlstates.js';

const STORE_DIR = fileURLToPath(new URL('../../../src/store/', import.meta.url));
const SRC_DIR = fileURLToPath(new URL('../../../src/', import.meta.url));

/** What a setting, a clause or a condition name in the store's code makes the server raise. */
const PROVOKED: readonly { readonly pattern: RegExp; readonly code: string }[] = [
  { pattern: /\block_timeout\b/, code: '55P03' },
  { pattern: /\block_not_available\b/, code: '55P03' },
  { pattern: /\bnowait\b/i, code: '55P03' },
  { pattern: /\bstatement_timeout\b/, code: '57014' },
  { pattern: /\bquery_canceled\b/, code: '57014' },
  { pattern: /\bidle_in_transaction_session_timeout\b/, code: '25P03' },
  { pattern: /\bidle_session_timeout\b/, code: '57P05' },
  { pattern: /\bdeadlock/i, code: '40P01' },
  { pattern: /\bserializ(?:ation|able)\b/i, code: '40001' },
  { pattern: /\binsufficient_privilege\b/, code: '42501' },
];

/**
 * An SQLSTATE as written in code or a comment: two digits or a letter class, then three; not a
 * piece of a date or a time (`2026-11-01T00:00`).
 */
const SQLSTATE = /(?<![-:.\w])(?:[0-9]{2}|EG|P0|XX|HV|F0)[0-9A-Z]{3}(?![:\w])/g;

/** Every file under `dir` whose name `wanted` matches, but the table itself. */
function sources(dir: string, wanted: RegExp): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sources(path, wanted);
    return wanted.test(e.name) && e.name !== 'store-sqlstates.ts' ? [path] : [];
  });
}

/** Every `.ts` and `.sql` file under src/store, but the table itself. */
function storeSources(): string[] {
  return sources(STORE_DIR, /\.(ts|sql)$/);
}

/** The SQLSTATEs the store's code mentions, each with the first place that does. */
function mentionedSqlstates(): Map<string, string> {
  const found = new Map<string, string>();
  const note = (code: string, file: string): void => {
    if (!found.has(code)) found.set(code, relative(STORE_DIR, file));
  };
  for (const file of storeSources()) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(SQLSTATE)) {
      // Numbers that look like one (a port, a count of milliseconds) are not SQLSTATEs: a class
      // PostgreSQL defines starts with 0–5, and none of them is all zeros past it.
      if (/^[0-9]{5}$/.test(m[0]) && (m[0] > '59999' || /^[0-9]0000$/.test(m[0]))) continue;
      note(m[0], file);
    }
    for (const { pattern, code } of PROVOKED) if (pattern.test(text)) note(code, file);
    // `raise exception '…'` without `using errcode`: plpgsql's own P0001.
    for (const m of text.matchAll(/raise exception[^;]*;/gi)) if (!/errcode/i.test(m[0])) note('P0001', file);
    // A condition name this test does not know yet: map it above, then classify it.
    for (const m of text.matchAll(/errcode\s*=\s*'([a-z_]+)'/g)) {
      if (!PROVOKED.some((p) => p.pattern.test(m[1]!))) note(`unmapped condition name ${m[1]}`, file);
    }
  }
  return found;
}

function storeRefusal(code: string): StoreError {
  return new StoreError(`store.recordOutcome failed: ${code}`, {
    cause: Object.assign(new Error(code), { code }),
  });
}

describe('the SQLSTATEs of the store', () => {
  it('every SQLSTATE the store code raises or provokes is classified on purpose, by its own entry', () => {
    const mentioned = mentionedSqlstates();
    // The scan sees what it must: the lock_timeout of the hot functions and the store's own codes.
    expect([...mentioned.keys()]).toEqual(expect.arrayContaining(['55P03', '40P01', 'EG404', 'P0001']));
    const unclassified = [...mentioned].filter(([code]) => !Object.hasOwn(STORE_SQLSTATES, code));
    expect(unclassified.map(([code, file]) => `${code} (${file})`)).toEqual([]);
  });

  it("a lock wait past lock_timeout (55P03) is transient: a migration's lock passes", () => {
    expect(isTransientSqlstate('55P03')).toBe(true);
    expect(isTransientStoreFailure(storeRefusal('55P03'))).toBe(true);
  });

  it('what the server raises whatever the store does is transient: connections, resources, shutdown, rollback', () => {
    for (const code of [
      '08000',
      '08001',
      '08003',
      '08004',
      '08006',
      '08P01',
      '40001',
      '40P01',
      '53000',
      '53100',
      '53200',
      '53300',
      '57014',
      '57P01',
      '57P02',
      '57P03',
      '57P05',
      '58000',
      '58030',
    ])
      expect(isTransientSqlstate(code), code).toBe(true);
  });

  it("a refusal about the write itself is not: the store's own codes, a raise, a constraint, bad input", () => {
    for (const code of [
      'EG400',
      'EG404',
      'EG409',
      'EG422',
      'P0001',
      '23505',
      '22P02',
      '42883',
      '42501',
      'XX000',
    ])
      expect(isTransientSqlstate(code), code).toBe(false);
  });

  it('the outcome outbox retries exactly what the table calls transient', () => {
    const codes = Object.keys(STORE_SQLSTATES).flatMap((k) =>
      k.length === 5 ? [k] : [`${k}000`, `${k}P99`],
    );
    for (const code of codes) {
      expect(sqlstateRule(code), code).toBeDefined();
      expect(isTransientStoreFailure(storeRefusal(code)), code).toBe(isTransientSqlstate(code));
    }
    // No SQLSTATE at all: the connection was cut or the driver gave up waiting, an outage.
    expect(isTransientStoreFailure(new StoreError('store.recordOutcome failed: Connection terminated'))).toBe(
      true,
    );
    // Not the store's error: a bug, never retried.
    expect(isTransientStoreFailure(Object.assign(new Error('x'), { code: '55P03' }))).toBe(false);
  });

  it('no TypeScript but the table reads an SQLSTATE: every decision on one is made there', () => {
    // An SQLSTATE as a string in code ('55P03', "EG404"), not in a comment's backquotes.
    const literal = /['"](?:[0-9]{2}|EG|P0|XX|HV|F0)[0-9A-Z]{3}['"]/;
    const found = sources(SRC_DIR, /\.ts$/).flatMap((file) =>
      readFileSync(file, 'utf8')
        .split('\n')
        .flatMap((line, i) =>
          literal.test(line) ? [`${relative(SRC_DIR, file)}:${i + 1}: ${line.trim()}`] : [],
        ),
    );
    expect(found).toEqual([]);
  });

  it('maps every refusal a mapped function raises: EG404 to not found, the others as the function says', () => {
    for (const fn of Object.keys(FUNCTION_REFUSALS) as RefusingFunction[]) {
      const text = readFileSync(join(STORE_DIR, 'functions', `${fn}.sql`), 'utf8');
      const raised = new Set([...text.matchAll(/errcode\s*=\s*'(EG\d{3})'/g)].map((m) => m[1]!));
      expect(raised.size, fn).toBeGreaterThan(0);
      for (const code of raised) {
        const refusal = functionRefusal(fn, Object.assign(new Error(`refused ${code}`), { code }));
        expect(refusal?.code, `${fn} ${code}`).toBe(
          code === 'EG404' ? 'EG_ERR_NOT_FOUND' : FUNCTION_REFUSALS[fn][code as 'EG400' | 'EG409' | 'EG422'],
        );
        expect(refusal?.message).toBe(`refused ${code}`);
      }
    }
    expect(functionRefusal('eg_release_run', Object.assign(new Error('x'), { code: 'EG409' }))?.code).toBe(
      'EG_ERR_RUN_STATE',
    );
    // Not one of its own refusals: the caller's error stays what it was.
    expect(functionRefusal('eg_approval', Object.assign(new Error('x'), { code: '55P03' }))).toBeNull();
    expect(functionRefusal('eg_approval', new Error('Connection terminated'))).toBeNull();
  });
});
