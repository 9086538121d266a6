import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { computeEventHash, verifyChain } from '../../../src/store/audit-chain.js';
import { storeEvents, verifyStoreChain } from '../../../src/store/store-events.js';
import type { EventRecord } from '../../../src/store/types.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { block, expectVerdict, newKey, newRun, outcome, reserve } from './inputs.js';

async function allEvents(store: TestStore): Promise<EventRecord[]> {
  const events: EventRecord[] = [];
  for await (const e of storeEvents(store, { pageSize: 7 })) events.push(e);
  return events;
}

for (const target of storeTargets()) {
  describe(`hash-chained event log on ${target.name}`, () => {
    let store: TestStore;

    beforeAll(async () => {
      store = await openTestStore(target);
      // A little history: allow + confirm, a duplicate, a failure and its retry, a block.
      const key = newKey();
      const a = await store.decide(reserve(newRun(), key));
      expectVerdict(a, 'allow');
      await store.recordOutcome(outcome(a, key, 'succeeded'));
      await store.decide(reserve(newRun(), key));
      const key2 = newKey();
      const b = await store.decide(reserve(newRun(), key2));
      expectVerdict(b, 'allow');
      await store.recordOutcome(outcome(b, key2, 'failed', { dispatchState: 'not_sent', status: null }));
      await store.decide(reserve(newRun(), key2));
      await store.decide(block(newRun(), 'policy: destroy is not allowed'));
    });

    afterAll(async () => {
      await store?.close();
    });

    it('events are written in the transaction of their state change, with types and ids', async () => {
      const events = await allEvents(store);
      expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
      const types = new Set(events.map((e) => e.type));
      for (const t of [
        'decision.recorded',
        'operation.opened',
        'key.reserved',
        'attempt.started',
        'attempt.finished',
        'operation.state_changed',
        'key.confirmed',
        'key.released',
      ]) {
        expect(types).toContain(t);
      }
      const started = events.find((e) => e.type === 'attempt.started' && JSON.parse(e.payload).number === 2);
      expect(JSON.parse(started!.payload)).toMatchObject({ retryReason: 'connection_not_established' });
      for (const e of events) expect(e.recordedAtUs).toMatch(/^\d{16}$/);
    });

    it('the JavaScript hash reproduces the database hash of every event', async () => {
      const events = await allEvents(store);
      for (const e of events) expect(computeEventHash(e)).toBe(e.hash);
      expect(await verifyStoreChain(store)).toMatchObject({ ok: true, checked: events.length });
    });

    it('the database refuses UPDATE, DELETE and TRUNCATE on events', async () => {
      await expect(store.query(`update events set payload = '{}' where seq = 1`)).rejects.toThrow(
        /append-only/,
      );
      await expect(store.query('delete from events where seq = 1')).rejects.toThrow(/append-only/);
      await expect(store.query('truncate events')).rejects.toThrow(/append-only/);
      expect(await verifyStoreChain(store)).toMatchObject({ ok: true });
    });

    it('verifyChain detects tampering on an exported copy of the events', async () => {
      const head = await store.chainHead();
      const events = await allEvents(store);
      const copy = (): EventRecord[] => events.map((e) => ({ ...e }));

      const edited = copy();
      edited[2] = { ...edited[2]!, payload: edited[2]!.payload.replace('acme', 'evil') };
      expect(await verifyChain(edited, head)).toMatchObject({ ok: false, firstBad: { seq: 3 } });

      const deleted = copy();
      deleted.splice(3, 1);
      expect(await verifyChain(deleted, head)).toMatchObject({ ok: false, firstBad: { seq: 5 } });

      const inserted = copy();
      inserted.splice(3, 0, { ...inserted[3]!, payload: '{"forged": true}' });
      expect(await verifyChain(inserted, head)).toMatchObject({ ok: false, firstBad: { seq: 4 } });

      const reordered = copy();
      [reordered[4], reordered[5]] = [reordered[5]!, reordered[4]!];
      expect(await verifyChain(reordered, head)).toMatchObject({ ok: false, firstBad: { seq: 6 } });

      expect(await verifyChain(copy().slice(0, -2), head)).toMatchObject({
        ok: false,
        firstBad: { seq: head.lastSeq - 1, reason: expect.stringContaining('truncated') },
      });
    });

    describe('tampering inside the database, triggers disabled by a superuser', () => {
      beforeAll(async () => {
        await store.query('create table events_backup as select * from events');
        await store.query('alter table events disable trigger all');
      });

      afterEach(async () => {
        await store.query('delete from events');
        await store.query('insert into events select * from events_backup');
        expect(await verifyStoreChain(store)).toMatchObject({ ok: true });
      });

      afterAll(async () => {
        await store.query('alter table events enable trigger all');
        await store.query('drop table events_backup');
      });

      it('an edited payload', async () => {
        await store.query(`update events set payload = replace(payload, 'acme', 'evil') where seq = 3`);
        expect(await verifyStoreChain(store)).toMatchObject({
          ok: false,
          firstBad: { seq: 3, reason: expect.stringContaining('edited') },
        });
      });

      it('a deleted row', async () => {
        await store.query('delete from events where seq = 4');
        expect(await verifyStoreChain(store)).toMatchObject({
          ok: false,
          firstBad: { seq: 5, reason: expect.stringContaining('missing') },
        });
      });

      it('an inserted row (later rows renumbered, forged hash linked to its predecessor)', async () => {
        const [third] = await allEvents(store).then((es) => es.filter((e) => e.seq === 3));
        await store.query('update events set seq = -seq where seq >= 4');
        await store.query('update events set seq = 1 - seq where seq < 0');
        const forged = {
          seq: 4,
          type: 'key.released',
          operationId: null,
          recordedAtUs: third!.recordedAtUs,
          payload: '{"forged": true}',
          prevHash: third!.hash,
        };
        await store.query(
          `insert into events (seq, type, operation_id, recorded_at, recorded_at_us, payload, prev_hash, hash)
           values (4, 'key.released', null, now(), ${forged.recordedAtUs}, '${forged.payload}', '${forged.prevHash}',
                   '${computeEventHash(forged)}')`,
        );
        await store.query(`update chain_head set last_seq = last_seq + 1`);
        expect(await verifyStoreChain(store)).toMatchObject({ ok: false, lastSeq: 4, firstBad: { seq: 5 } });
        await store.query(`update chain_head set last_seq = last_seq - 1`);
      });

      it('reordered rows', async () => {
        await store.query('update events set seq = -seq where seq in (5, 6)');
        await store.query('update events set seq = case seq when -5 then 6 else 5 end where seq < 0');
        expect(await verifyStoreChain(store)).toMatchObject({ ok: false, firstBad: { seq: 5 } });
      });

      it('a truncated tail', async () => {
        const head = await store.chainHead();
        await store.query(`delete from events where seq > ${head.lastSeq - 2}`);
        expect(await verifyStoreChain(store)).toMatchObject({
          ok: false,
          lastSeq: head.lastSeq - 2,
          firstBad: { reason: expect.stringContaining('truncated') },
        });
      });
    });

    it('appends continue the intact chain after the tampering drills', async () => {
      const key = newKey();
      const a = await store.decide(reserve(newRun(), key));
      expectVerdict(a, 'allow');
      await store.recordOutcome(outcome(a, key, 'succeeded'));
      await expect(store.query('delete from events where seq = 1')).rejects.toThrow(/append-only/);
      expect(await verifyStoreChain(store)).toMatchObject({ ok: true });
    });
  });
}
