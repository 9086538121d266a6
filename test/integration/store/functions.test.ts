import { readdir, readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import {
  CHECKSUM_SETTING,
  FUNCTIONS_DIR,
  TRIGGER_FUNCTION,
  TRIGGER_FUNCTIONS,
} from '../../../src/store/functions/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, reserve } from './inputs.js';

/*
 * The live database against src/store/functions/: a fresh store and an upgraded one must both end
 * with exactly the functions the files define, each with the body its file holds.
 */

interface LiveFunction {
  readonly name: string;
  readonly oid: string;
  readonly body: string;
}

/** Every eg_ function of the store's schema but the migrations' trigger function, by name. */
async function liveFunctions(store: TestStore): Promise<LiveFunction[]> {
  return store.query<LiveFunction>(`
    select p.proname as name, p.oid::text as oid, p.prosrc as body
    from pg_proc p join pg_namespace n on n.oid = p.pronamespace
    where n.nspname = current_schema() and starts_with(p.proname, 'eg_') and p.proname not in (${TRIGGER_FUNCTIONS.map((f) => `'${f}'`).join(', ')})
    order by p.proname, p.oid`);
}

/** Each file's function name and the body between its $$ markers. */
async function fileFunctions(): Promise<Map<string, string>> {
  const files = (await readdir(FUNCTIONS_DIR)).filter((f) => f.endsWith('.sql')).sort();
  const bodies = new Map<string, string>();
  for (const file of files) {
    const text = await readFile(new URL(file, FUNCTIONS_DIR), 'utf8');
    const body = /\$\$([\s\S]*)\$\$/.exec(text)?.[1];
    if (body === undefined) throw new Error(`${file}: no $$ … $$ body`);
    bodies.set(file.slice(0, -'.sql'.length), body);
  }
  return bodies;
}

async function expectLiveEqualsFiles(store: TestStore): Promise<void> {
  const live = await liveFunctions(store);
  const files = await fileFunctions();
  // Names with duplicates kept: an overload left behind shows up as a name twice.
  expect(live.map((f) => f.name)).toEqual([...files.keys()]);
  for (const f of live) expect(f.body, f.name).toBe(files.get(f.name));
}

for (const target of storeTargets()) {
  describe(`store functions on ${target.name}`, () => {
    it('a fresh store has exactly the functions of src/store/functions/, each as its file says', async () => {
      const store = await openTestStore(target);
      try {
        await expectLiveEqualsFiles(store);
        const trigger = await store.query(`select 1 from pg_proc where proname = '${TRIGGER_FUNCTION}'`);
        expect(trigger).toHaveLength(1);
      } finally {
        await store.close();
      }
    });

    it('prices sequential scans out of the hot entry points and recovery, and bounds their lock waits', async () => {
      // A plan cached from an analyse of a small table would scan it as it grows (bench/README.md).
      const store = await openTestStore(target);
      try {
        // As text: drivers differ on text[] (pg parses it, PGlite may not).
        const rows = await store.query<{ proname: string; proconfig: string | null }>(
          `select proname, array_to_string(proconfig, ',') as proconfig from pg_proc
           where proname in ('eg_batch', 'eg_decide', 'eg_record_outcome', 'eg_recover') order by proname`,
        );
        // lock_timeout: a hot call never waits for a lock past the gate's read timeout (eg_decide.sql).
        expect(rows).toEqual([
          { proname: 'eg_batch', proconfig: 'lock_timeout=4s' },
          { proname: 'eg_decide', proconfig: 'enable_seqscan=off,lock_timeout=4s' },
          { proname: 'eg_record_outcome', proconfig: 'enable_seqscan=off,lock_timeout=4s' },
          { proname: 'eg_recover', proconfig: 'enable_seqscan=off' },
        ]);
      } finally {
        await store.close();
      }
    });

    it('migrating again redefines nothing', async () => {
      const store = await openTestStore(target);
      try {
        const before = await liveFunctions(store);
        await store.migrate();
        await store.migrate();
        expect(await liveFunctions(store)).toEqual(before);
      } finally {
        await store.close();
      }
    });

    it('an old database loses the functions and signatures its files no longer define', async () => {
      const store = await openTestStore(target);
      try {
        // As a store migrated by the old 0001 and 0002 migrations looks: an old signature of
        // eg_allow beside the current one, an old body, and no checksum yet.
        await store.query(`create function eg_allow(p_decision_id text, p_operation_id text, p_attempt_id text,
          p_number int, p_retry_of text, p_retry_reason text) returns json language sql stable as $$ select null::json $$`);
        await store.query(`create or replace function eg_iso(p_at timestamptz) returns text language sql stable
          as $$ select 'old' $$`);
        await store.query(`create function eg_gone() returns int language sql as $$ select 1 $$`);
        await store.query(`delete from settings where name = '${CHECKSUM_SETTING}'`);

        await store.migrate();

        await expectLiveEqualsFiles(store);
        expect(await store.query(`select 1 from pg_proc where proname = '${TRIGGER_FUNCTION}'`)).toHaveLength(
          1,
        );
        expectVerdict(await store.decide(reserve(newRun(), newKey())), 'allow');
      } finally {
        await store.close();
      }
    });

    if (target.kind === 'postgres') {
      it('concurrent gate starts redefine the functions one at a time (the advisory lock)', async () => {
        const store = await openTestStore(target);
        const others = await Promise.all([1, 2, 3, 4].map(() => store.openSibling()));
        try {
          // Without the lock, the starts that listed eg_gone before the first one dropped it fail
          // to drop it again ("function eg_gone() does not exist").
          await store.query(`create function eg_gone() returns int language sql as $$ select 1 $$`);
          await store.query(`delete from settings where name = '${CHECKSUM_SETTING}'`);
          await Promise.all([store, ...others].map((s) => s.migrate()));
          await expectLiveEqualsFiles(store);
          expectVerdict(await others[0]!.decide(reserve(newRun(), newKey())), 'allow');
        } finally {
          for (const o of others) await o.close();
          await store.close();
        }
      });
    }
  });
}
