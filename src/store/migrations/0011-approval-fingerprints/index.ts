import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0011: an approval is for that very request. A card recorded the attempt whose outcome was lost
 * (intent.fingerprint) but not the request that asked for it, and a card was matched by operation
 * and attempt only: once approved, a request with the same key values and another body (another
 * payee) went out under it. Now a card holds the fingerprint of the request a person is asked
 * about, and only a request with that fingerprint may use it (eg_unknown.sql).
 *
 * - approvals.request_fingerprint: the request the card is about: the held proposal's, or the lost
 *   attempt's for a card opened by recovery. Cards recorded before: the lost attempt's, except a
 *   card a CHANGED request asked for (its planned recovery says so), whose request was never
 *   recorded: it stays null and allows nothing; an open one is withdrawn, so the next proposal
 *   opens a card that names its request.
 * - One open card per operation AND request (was: per operation): two different requests after one
 *   lost attempt are two questions for a person, each on its own card.
 *
 * Schema only; the functions are in src/store/functions/. Never edit once applied.
 */

const STATEMENTS: readonly string[] = [
  'alter table approvals add column request_fingerprint text',
  `update approvals set request_fingerprint = intent ->> 'fingerprint'
    where planned_recovery not like '%CHANGED the request%'`,
  `update approvals set state = 'withdrawn', decided_at = now(), reason =
    'the request it was asked for was not recorded (migration 0011): it could approve no request'
    where state = 'requested' and request_fingerprint is null`,
  'drop index approvals_one_open_idx',
  // eg_request_approval finds a request's open card by it; eg_unknown an approved one by operation.
  `create unique index approvals_one_open_idx on approvals (operation_id, request_fingerprint)
    where state = 'requested'`,
];

export const migration0011: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
