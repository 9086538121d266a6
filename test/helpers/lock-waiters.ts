/**
 * Waiting for a race to be set up on PostgreSQL: until `n` other backends of the database are
 * waiting for a lock. Counted, not found by query text: a loaded machine reports a query late.
 * Bounded (about ten seconds, which holds on a machine several times busier than a quiet one);
 * a race that never sets up fails the test rather than passing without being run.
 */
import type pg from 'pg';

export async function untilLockWaiters(side: pg.Client, n: number): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const waiting = await side.query<{ n: string }>(
      `select count(*) as n from pg_stat_activity where datname = current_database()
       and pid <> pg_backend_pid() and wait_event_type = 'Lock'`,
    );
    if (Number(waiting.rows[0]!.n) >= n) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`never saw ${n} backends waiting for a lock`);
}
