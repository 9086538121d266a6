/**
 * The store flapping under load: the relay between the gate and PostgreSQL goes
 * down and up every `period` ms while 16 agents propose many keys, each key by 2–3 runs that retry
 * whatever the gate answers. Afterwards the gate is stopped gracefully and the destination's
 * ledger is compared with the trail.
 *
 * Short variant (`npm test`): 100 ms for 3 s, 300 keys. Long (`EFFECTGATE_FAULTS=long`): 50, 100
 * and 250 ms for 10 s each, 3 000 keys each.
 */
import { afterEach, describe, it } from 'vitest';
import { storeTargets, type TestStore } from '../helpers/store.js';
import { faultCase, LONG_VARIANT } from './fault-cases.js';
import {
  CaseRecorder,
  honors,
  type InProcessGate,
  openFaultStore,
  runLoad,
  startInProcessGate,
} from './fault-harness.js';
import { type LedgerDestination, startLedgerDestination } from './ledger-destination.js';
import { startTcpRelay, type TcpRelay } from './tcp-relay.js';

const RATES = LONG_VARIANT ? [50, 100, 250] : [100];
const FLAP_FOR_MS = LONG_VARIANT ? 10_000 : 3_000;
const KEYS = LONG_VARIANT ? 3_000 : 300;
const AGENTS = 16;
/**
 * The destination takes this long per effect, as a real API does: calls are in flight at the
 * destination when the store drops, so outcomes fall due while it is down.
 */
const DESTINATION_MS = 25;
/** After the flapping the store stays up: the load gets this long to settle its retries. */
const SETTLE_MS = LONG_VARIANT ? 60_000 : 20_000;

for (const target of storeTargets()) {
  describe.skipIf(target.kind !== 'postgres')(
    `store flapping under ${AGENTS} agents, ${KEYS} keys (${target.name}${target.kind === 'postgres' ? '' : `: skipped, ${faultCase('flapping-100ms').notOn}`})`,
    () => {
      let dest: LedgerDestination | undefined;
      let store: TestStore | undefined;
      let relay: TcpRelay | undefined;
      let gate: InProcessGate | undefined;

      afterEach(async () => {
        relay?.up();
        await gate?.close().catch(() => undefined);
        await relay?.close();
        await store?.close();
        await dest?.close();
      });

      for (const period of RATES) {
        it(
          `flapping every ${period} ms for ${FLAP_FOR_MS} ms: zero keys performed twice, zero attempts without an outcome after a graceful stop, the trail agrees with the ledger`,
          async () => {
            const rec = new CaseRecorder(`flapping-${period}ms`, 'postgres');
            dest = await startLedgerDestination({ honors, defaults: { delayMs: DESTINATION_MS } });
            store = await openFaultStore(target);
            relay = await startTcpRelay();
            gate = await startInProcessGate({
              store: relay.url(store.url),
              instanceId: `fault-flapping-${period}`,
              drainTimeoutMs: 15_000,
            });
            const flapping = relay.flap(period, FLAP_FOR_MS);
            const load = await runLoad({
              proxyUrl: gate.proxyUrl,
              destUrl: dest.url,
              prefix: `flap${period}`,
              keys: KEYS,
              agents: AGENTS,
              spreadMs: FLAP_FOR_MS,
              maxTries: 200,
              deadlineMs: FLAP_FOR_MS + SETTLE_MS,
            });
            await flapping;
            rec.count(load.answers);
            rec.check(
              (load.answers['503'] ?? 0) > 0,
              'no proposal met the store down: the flapping did not hit the load (harness)',
            );
            rec.check(
              load.unsettled === 0,
              `${load.unsettled} of ${load.tasks} proposals never settled (${load.unsettledExamples.join('; ')})`,
            );
            const report = await gate.close();
            rec.check(
              report.unwrittenOutcomes === 0,
              `${report.unwrittenOutcomes} outcome(s) unwritten at close`,
            );
            rec.check(report.abandonedCalls === 0, `${report.abandonedCalls} call(s) abandoned at close`);
            console.info(
              `[fault flapping-${period}ms] relay ${JSON.stringify(relay.stats())}; ${load.requests} requests for ${load.tasks} proposals`,
            );
            await rec.finish({ dest, store, proposedKeys: KEYS, strictUnknown: true });
          },
          FLAP_FOR_MS + SETTLE_MS + 60_000,
        );
      }
    },
  );
}
