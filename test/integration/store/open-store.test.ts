import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { StoreError } from '../../../src/errors.js';
import { EVENT_CHAINS } from '../../../src/store/audit-chain.js';
import { migrationProvider } from '../../../src/store/migrations/index.js';
import { openKyselyStore } from '../../../src/store/open-store.js';
import { openTestStore, storeTargets } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, reserve, sleep } from './inputs.js';

describe('openStore', () => {
  it('reports an unreachable PostgreSQL as EG_ERR_STORE_UNAVAILABLE', async () => {
    const err = await openKyselyStore({ url: 'postgres://postgres@127.0.0.1:1/none' }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(StoreError);
    expect(err).toMatchObject({ code: 'EG_ERR_STORE_UNAVAILABLE', cause: expect.anything() });
  });

  it('serializes the single PGlite connection: nothing runs inside another caller’s transaction', async () => {
    const store = await openKyselyStore({ url: 'pglite:memory' });
    try {
      await sql`create table probe (n int)`.execute(store.db);
      const tx = store.db.transaction().execute(async (trx) => {
        await sql`insert into probe values (1)`.execute(trx);
        await sleep(50);
        throw new Error('roll back');
      });
      // Handled now: it rejects while the query below is still waiting for the connection.
      const rolledBack = tx.then(
        () => null,
        (err: unknown) => err,
      );
      await sleep(10); // the transaction is open now
      const seen = await sql<{ count: number }>`select count(*)::int as count from probe`.execute(store.db);
      expect(await rolledBack).toMatchObject({ message: 'roll back' });
      expect(seen.rows[0]?.count).toBe(0);
    } finally {
      await store.close();
    }
  });

  it('never runs a decide inside another holder’s transaction, though decides are pipelined', async () => {
    const store = await openKyselyStore({ url: 'pglite:memory' });
    try {
      const tx = store.db.transaction().execute(async (trx) => {
        await sql`select 1`.execute(trx);
        await sleep(50);
        throw new Error('roll back');
      });
      const rolledBack = tx.then(
        () => null,
        (err: unknown) => err,
      );
      await sleep(10); // the transaction is open now
      const decided = await Promise.all([1, 2, 3].map(() => store.decide(reserve(newRun(), newKey()))));
      expect(await rolledBack).toMatchObject({ message: 'roll back' });
      for (const d of decided) {
        expectVerdict(d, 'allow');
        // Had it run inside the transaction, the rollback would have taken it away.
        expect(await store.getOperation(d.operationId)).not.toBeNull();
      }
    } finally {
      await store.close();
    }
  });
});

for (const target of storeTargets()) {
  describe(`migrations on ${target.name}`, () => {
    it('migrate: false opens without migrating; migrate() applies, and is idempotent', async () => {
      const store = await openTestStore(target, { migrate: false });
      try {
        await expect(store.chainHeads()).rejects.toBeInstanceOf(StoreError);
        await store.migrate();
        await store.migrate();
        expect(await store.chainHeads()).toEqual(
          Array.from({ length: EVENT_CHAINS }, (_, chain) => ({
            chain,
            lastSeq: 0,
            lastHash: '0'.repeat(64),
            baseSeq: 0,
            baseHash: '0'.repeat(64),
          })),
        );
        expectVerdict(await store.decide(reserve(newRun(), newKey())), 'allow');
      } finally {
        await store.close();
      }
    });

    it('a failing migration is EG_ERR_MIGRATION_FAILED and leaves nothing half-applied', async () => {
      const store = await openTestStore(target, { migrate: false });
      try {
        await store.rawQuery('create table events (squatter int)');
        await expect(store.migrate()).rejects.toMatchObject({
          code: 'EG_ERR_MIGRATION_FAILED',
          message: expect.stringContaining('0001-initial'),
        });
        const tables = await store.rawQuery<{ n: number }>(
          `select count(*)::int as n from information_schema.tables where table_name in ('runs', 'chain_head')`,
        );
        expect(tables[0]?.n).toBe(0);
      } finally {
        await store.close();
      }
    });

    if (target.kind === 'postgres') {
      it('concurrent starts of several gate processes migrate safely (the migrator lock)', async () => {
        const store = await openTestStore(target, { migrate: false });
        const others = await Promise.all(
          [1, 2, 3, 4].map(() => openKyselyStore({ url: store.url, migrate: false })),
        );
        try {
          await Promise.all([store, ...others].map((s) => s.migrate()));
          const applied = await store.query<{ n: number }>('select count(*)::int as n from kysely_migration');
          expect(applied[0]?.n).toBe(Object.keys(await migrationProvider.getMigrations()).length);
          expectVerdict(await others[0]!.decide(reserve(newRun(), newKey())), 'allow');
        } finally {
          for (const o of others) await o.close();
          await store.close();
        }
      });
    }
  });
}
