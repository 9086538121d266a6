import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { verifySealedLog } from '../../../src/store/audit-log-verify.js';
import type { NoteVerifier } from '../../../src/store/signed-note.js';
import type { TestStore } from '../../helpers/store.js';
import { newKey, newRun, reserve } from './inputs.js';

/** `n` allows of fresh keys, one call (and transaction) each: one chained event each. */
export async function decideMany(store: TestStore, n: number): Promise<void> {
  for (let i = 0; i < n; i++) await store.decide(reserve(newRun(), newKey()));
}

/** The sealed log verifies, every checkpoint's events rebuilt (`rehashed` of them), none left unsealed. */
export async function expectAllSealed(
  store: TestStore,
  verifier: NoteVerifier,
  rehashed: number,
): Promise<void> {
  expect(await verifySealedLog(store, verifier)).toMatchObject({
    ok: true,
    rehashed,
    unsealed: { count: 0 },
  });
}

/**
 * For a describe whose tests tamper with the events table as a superuser would (its triggers
 * off): `seal` makes and seals the log they start from, each test gets that log back after it
 * (and it verifies again), and the triggers are back on at the end. `store` is read when the
 * hooks run, so it may be assigned in an outer beforeAll.
 */
export function tamperEachTestAlone(
  store: () => TestStore,
  verifier: NoteVerifier,
  seal: () => Promise<void>,
): void {
  beforeAll(async () => {
    await seal();
    await store().query('create table events_backup as select * from events');
    await store().query('alter table events disable trigger all');
  });
  afterEach(async () => {
    await store().query('delete from events');
    await store().query('insert into events select * from events_backup');
    expect(await verifySealedLog(store(), verifier)).toMatchObject({ ok: true });
  });
  afterAll(async () => {
    await store().query('alter table events enable trigger all');
    await store().query('drop table events_backup');
  });
}
