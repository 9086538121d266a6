/**
 * The ungoverned path's reference proxies, measured in the same run as the gate: the bare undici
 * hop (bench/hop-proxy.ts) and Debian's squid (bench/squid-proxy.ts), each with the ungoverned
 * scenario's requests, at every connection count. Run with `ungoverned` (its targets compare with
 * them) or on their own (`hop`, `squid` in BENCH_SCENARIOS).
 */
import { resolve } from 'node:path';
import { spawnListening, stopChild } from './children.js';
import { referenceScenario, type ScenarioSpec } from './scenarios.js';
import { startSquid } from './squid-proxy.js';

export interface ReferenceRun {
  readonly root: string;
  readonly upstreamPort: number;
  readonly connections: readonly number[];
  readonly hop: boolean;
  readonly squid: boolean;
  /** Measures one scenario; `pid` is the proxy whose CPU per request is reported. */
  readonly measure: (spec: ScenarioSpec, pid?: number) => Promise<void>;
  /** A reference that could not run says why here (printed with the results). */
  readonly note: (why: string) => void;
}

export async function measureReferences(r: ReferenceRun): Promise<void> {
  const at = (proxyPort: number, connections: number) => ({
    proxyPort,
    upstreamPort: r.upstreamPort,
    connections,
  });
  if (r.hop) {
    const hop = await spawnListening({
      name: 'hop proxy',
      args: ['--import', 'tsx', resolve(r.root, 'bench/hop-proxy.ts')],
      listening: /hop proxy listening on 127\.0\.0\.1:(\d+)/,
    });
    console.log(`reference: bare undici hop (port ${hop.port}):`);
    for (const c of r.connections)
      await r.measure(referenceScenario('hop', at(hop.port, c)), hop.process.pid);
    await stopChild(hop.process);
  }
  if (r.squid) {
    const started = await startSquid(r.root);
    if ('skipped' in started) {
      console.log(`note: squid reference skipped: ${started.skipped}`);
      r.note(`squid reference skipped: ${started.skipped}`);
      return;
    }
    const { squid } = started;
    console.log(`reference: squid (port ${squid.port}):`);
    try {
      for (const c of r.connections)
        await r.measure(referenceScenario('squid', at(squid.port, c)), squid.process.pid);
    } finally {
      await squid.stop();
    }
  }
}
