/**
 * The gate itself dies: the built CLI is SIGKILLed with calls in flight at the
 * destination and restarted at once with the same --instance-id (both stores), and, on PostgreSQL,
 * killed while the store is down past pending_ttl so the outcomes it had could never be written.
 * Either way the next proposal of each key must never be a second effect: a plain tool is held
 * (428), an honoured one goes out again with the SAME Idempotency-Key (the destination replays),
 * a reconcilable one is looked up first.
 *
 * Needs `npm run build` (the CLI runs from dist/).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, it } from 'vitest';
import type { ProxyProcess } from '../helpers/proxy-process.js';
import { storeTargets, type TestStore } from '../helpers/store.js';
import { faultCase } from './fault-cases.js';
import {
  AgentClient,
  type Answer,
  CaseRecorder,
  type CliStore,
  COLLECTIONS,
  type Collection,
  cliGateArgs,
  cliStore,
  honors,
  type InProcessGate,
  openFaultStore,
  PAST_TTL_MS,
  startCliGate,
  startInProcessGate,
} from './fault-harness.js';
import { type Arrival, type LedgerDestination, startLedgerDestination } from './ledger-destination.js';
import { startTcpRelay, type TcpRelay } from './tcp-relay.js';

/**
 * What the next proposal of a key whose first attempt has no known outcome must get, per tool:
 * never a second effect at the destination (the ledger checker counts those), and the answer
 * its unknown-outcome rule gives.
 */
function expectNextProposal(
  rec: CaseRecorder,
  dest: LedgerDestination,
  collection: Collection,
  first: Arrival,
  next: Answer,
  lookupsBefore: number,
): void {
  const retried = dest.arrivals().filter((a) => a.order === first.order && a.seq > first.seq);
  if (collection === 'held') {
    rec.check(
      next.status === 428,
      `held: the next proposal got ${next.status} ${next.verdict ?? ''}, not 428 hold`,
    );
    rec.check(retried.length === 0, `held: ${retried.length} more request(s) reached the destination`);
  } else if (collection === 'honored') {
    rec.check(next.status === 201, `honored: the next proposal got ${next.status}, not 201 (a replay)`);
    rec.check(
      retried.every((a) => a.idempotencyKey === first.idempotencyKey),
      `honored: the retry carried Idempotency-Key ${retried.map((a) => a.idempotencyKey).join(', ')}, not ${first.idempotencyKey}`,
    );
  } else {
    rec.check(
      dest.lookups() > lookupsBefore,
      'reconciled: the gate did not look the effect up before deciding',
    );
    rec.check(
      next.status === 409 && next.verdict === 'duplicate',
      `reconciled: the next proposal got ${next.status} ${next.verdict ?? ''}, not 409 duplicate (found by the lookup)`,
    );
    rec.check(retried.length === 0, `reconciled: ${retried.length} more request(s) reached the destination`);
  }
}

/** A SIGKILLed child has a signal code and no exit code; waiting for its exit again never ends. */
function isRunning(p: ProxyProcess): boolean {
  return p.child.exitCode === null && p.child.signalCode === null;
}

for (const target of storeTargets()) {
  describe(`the gate SIGKILLed with calls in flight (${target.name})`, () => {
    let dest: LedgerDestination | undefined;
    let where: CliStore | undefined;
    let proxy: ProxyProcess | undefined;
    let agent: AgentClient | undefined;

    afterEach(async () => {
      await agent?.close();
      if (proxy !== undefined && isRunning(proxy)) await proxy.stop('SIGKILL');
      await where?.dispose();
      await dest?.close();
    });

    it('restarted at once with the same --instance-id: the next proposal of each key is never a second effect', async () => {
      const rec = new CaseRecorder('sigkill-restart', target.kind);
      dest = await startLedgerDestination({ honors });
      where = await cliStore(target);
      const args = cliGateArgs(where.url, 'fault-gate-1');
      proxy = await startCliGate(args);
      agent = new AgentClient(proxy.url);
      for (const c of COLLECTIONS) dest.plan(`kill-${c}`, { behaviour: 'commit-and-hang' });
      const inflight = COLLECTIONS.map((c) => agent!.propose(dest!.url, c, `kill-${c}`, 'run-doomed'));
      const arrivals = await Promise.all(COLLECTIONS.map((c) => dest!.arrival(`kill-${c}`)));
      const killedAt = Date.now();
      await proxy.stop('SIGKILL');
      for (const a of await Promise.all(inflight)) rec.answered(a);
      await agent.close();

      // Immediately, same identity: this start must recover its previous life's attempts.
      proxy = await startCliGate(args);
      agent = new AgentClient(proxy.url);
      // Past pending_ttl too, so an expired reservation cannot pass for a free key either.
      await sleep(Math.max(0, PAST_TTL_MS - (Date.now() - killedAt)));
      for (const [i, c] of COLLECTIONS.entries()) {
        const lookups = dest.lookups();
        const next = rec.answered(await agent.propose(dest.url, c, `kill-${c}`, 'run-next'));
        expectNextProposal(rec, dest, c, arrivals[i]!, next, lookups);
      }
      await agent.close();
      const code = await proxy.stop('SIGTERM');
      rec.check(code === 0, `the restarted gate exited ${code} on SIGTERM`);
      await rec.finish({
        dest,
        store: await where.open(),
        proposedKeys: COLLECTIONS.length,
        strictUnknown: false,
      });
    }, 90_000);
  });

  describe.skipIf(target.kind !== 'postgres')(
    `the gate SIGKILLed while the store is down past pending_ttl (${target.name}${target.kind === 'postgres' ? '' : `: skipped, ${faultCase('down-past-ttl-gate-killed').notOn}`})`,
    () => {
      let dest: LedgerDestination | undefined;
      let store: TestStore | undefined;
      let relay: TcpRelay | undefined;
      let proxy: ProxyProcess | undefined;
      let other: InProcessGate | undefined;
      let agent: AgentClient | undefined;

      afterEach(async () => {
        relay?.up();
        await agent?.close();
        if (proxy !== undefined && isRunning(proxy)) await proxy.stop('SIGKILL');
        await other?.close().catch(() => undefined);
        await relay?.close();
        await store?.close();
        await dest?.close();
      });

      it('another gate then proposes each key: never a second effect', async () => {
        const rec = new CaseRecorder('down-past-ttl-gate-killed', 'postgres');
        dest = await startLedgerDestination({ honors });
        store = await openFaultStore(target);
        relay = await startTcpRelay();
        proxy = await startCliGate(cliGateArgs(relay.url(store.url), 'fault-gate-a'));
        agent = new AgentClient(proxy.url);
        for (const c of COLLECTIONS) dest.plan(`ttl-${c}`, { behaviour: 'hold' });
        const answers = COLLECTIONS.map((c) => agent!.propose(dest!.url, c, `ttl-${c}`, 'run-a'));
        const arrivals = await Promise.all(COLLECTIONS.map((c) => dest!.arrival(`ttl-${c}`)));
        relay.down();
        const downAt = Date.now();
        await sleep(200);
        for (const a of arrivals) a.release();
        for (const a of await Promise.all(answers)) rec.answered(a);
        // The store stays away past pending_ttl; the gate that holds the outcomes dies meanwhile.
        await sleep(Math.max(0, PAST_TTL_MS + 200 - (Date.now() - downAt)));
        await proxy.stop('SIGKILL');
        relay.up();
        await agent.close();

        // A second replica (its own identity; the dead one's heartbeat is still young, so no sweep
        // saves it): only the expired-reservation rule stands between the key and a second effect.
        other = await startInProcessGate({ store: store.url, instanceId: 'fault-gate-b' });
        agent = new AgentClient(other.proxyUrl);
        for (const [i, c] of COLLECTIONS.entries()) {
          const lookups = dest.lookups();
          const next = rec.answered(await agent.propose(dest.url, c, `ttl-${c}`, 'run-b'));
          expectNextProposal(rec, dest, c, arrivals[i]!, next, lookups);
        }
        const report = await other.close();
        rec.check(
          report.unwrittenOutcomes === 0,
          `${report.unwrittenOutcomes} outcome(s) unwritten at close`,
        );
        await rec.finish({ dest, store, proposedKeys: COLLECTIONS.length, strictUnknown: false });
      }, 90_000);
    },
  );
}
