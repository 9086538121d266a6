/**
 * A store restored from a dump into another PostgreSQL cluster carries transaction ids ahead of
 * its new database's (src/store/refuse-restored-store.ts). Events written there would read as
 * already seen by the projection's and the sealer's snapshots: never projected, never sealed, and
 * counted as sealed. Asked of it: a store that was never moved, written, projected and sealed, is
 * never refused; one whose recorded snapshot is ahead is refused by every gate that opens it
 * (migrating or not), and still read by the inspection commands.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditSealer } from '../../../src/store/audit-sealer.js';
import { openKyselyStore } from '../../../src/store/open-store.js';
import { testAuditKey } from '../../helpers/audit-keys.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { allows } from './audit-history.js';

const { signer } = testAuditKey('effectgate-restored');

for (const target of storeTargets()) {
  describe(`a store restored into another cluster on ${target.name}`, () => {
    let store: TestStore;
    beforeAll(async () => {
      store = await openTestStore(target);
    });
    afterAll(async () => {
      await store?.close();
    });

    it('a store never moved, written, projected and sealed, migrates again without a refusal', async () => {
      await allows(store, 5);
      await new AuditSealer({ store, signer }).seal();
      expect((await store.projectEvents({ wait: true })).more).toBe(false);
      await allows(store, 2);
      await expect(store.migrate()).resolves.toBeUndefined();
    });

    it('one whose projection snapshot is ahead of its database is refused, and read by inspection', async () => {
      const [{ was }] = (await store.query<{ was: string }>(
        'select after_snapshot::text as was from log_projection where id',
      )) as [{ was: string }];
      // As a dump restored elsewhere leaves it: a snapshot a million transactions ahead.
      await store.query(
        `update log_projection set after_snapshot = (
           (pg_snapshot_xmax(pg_current_snapshot())::text::bigint + 1000000)::text || ':' ||
           (pg_snapshot_xmax(pg_current_snapshot())::text::bigint + 1000000)::text || ':')::pg_snapshot
         where id`,
      );
      try {
        await expect(store.migrate()).rejects.toMatchObject({
          code: 'EG_ERR_STORE_RESTORED',
          message: expect.stringContaining('restored into another PostgreSQL cluster'),
        });
        if (target.kind === 'postgres') {
          await expect(
            openKyselyStore({ url: store.url, migrate: false, requireExisting: true, gate: true }),
          ).rejects.toMatchObject({ code: 'EG_ERR_STORE_RESTORED' });
          const reader = await openKyselyStore({ url: store.url, migrate: false, requireExisting: true });
          try {
            expect((await reader.chainHeads()).length).toBeGreaterThan(0);
          } finally {
            await reader.close();
          }
        }
      } finally {
        await store.query(`update log_projection set after_snapshot = '${was}'::pg_snapshot where id`);
      }
      await expect(store.migrate()).resolves.toBeUndefined();
    });
  });
}
