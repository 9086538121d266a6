/**
 * What an `audit export` of a sealed log costs, and its offline verification: `allows` allows and
 * their outcomes (the real store calls, 16 callers, two events each) are sealed by the gate's
 * sealer running meanwhile (every 250 ms, by snapshot), exported to a file (src/store/audit-export.ts: each checkpoint's leaves,
 * then its note), and the file verified back (audit-export-verify.ts: chains, every root, every
 * signature), and the store verified as `audit verify` does. Prints the time and rate of each step, the file's size and bytes per event, and the
 * process's peak RSS (the export and the verifier stream: it should not grow with the log).
 *
 * `node --import tsx bench/audit-export.ts [pg admin url | pglite] [allows]`
 * e.g. `… postgres://postgres@127.0.0.1:5432/test 25000`
 */
import { createWriteStream, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import {
  AuditSealer,
  generateNoteKey,
  newAuditKeyName,
  openStore,
  parseSignerKey,
  parseVerifierKey,
  uuidv7,
  verifyAuditExportFile,
  verifySealedLog,
  writeAuditExport,
} from '../src/store/index.js';
import { confirmInput, reserveInput } from './store-calls.js';
import { benchStoreUrl } from './stores.js';

const target = process.argv[2] ?? 'postgres://postgres@127.0.0.1:5432/test';
const allows = Number(process.argv[3] ?? 25_000);
const CALLERS = 16;

async function timed<T>(step: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await step();
  return { value, ms: Math.round(performance.now() - started) };
}

async function main(): Promise<void> {
  const { url, drop } = await benchStoreUrl(target);
  const dir = mkdtempSync(join(tmpdir(), 'eg-bench-export-'));
  const store = await openStore({ url });
  try {
    const key = generateNoteKey(newAuditKeyName());
    // The sealer runs while the calls do, every 250 ms, as a gate runs it: checkpoints by snapshot.
    const sealer = new AuditSealer({ store, signer: parseSignerKey(key.signerKey) });
    sealer.start();
    let next = 0;
    await Promise.all(
      Array.from({ length: CALLERS }, async () => {
        while (next < allows) {
          next += 1;
          const title = `export ${uuidv7()}`;
          const r = await store.decide(reserveInput(title, `bench-export-${uuidv7()}`));
          if (r.verdict !== 'allow') throw new Error(`bench: expected allow, got ${r.verdict}`);
          await store.recordOutcome(confirmInput(r, title));
        }
      }),
    );
    const events = (await store.chainHeads()).reduce((n, h) => n + h.lastSeq, 0);
    await sealer.stop();
    const sealed = await timed(() => sealer.seal());
    const peakBefore = process.resourceUsage().maxRSS;
    const file = join(dir, 'export.jsonl');
    const exported = await timed(async () => {
      const out = createWriteStream(file, { mode: 0o600 });
      const written = await writeAuditExport(store, out);
      out.end();
      await finished(out);
      return written;
    });
    const verified = await timed(() =>
      verifyAuditExportFile(file, { verifier: parseVerifierKey(key.verifierKey) }),
    );
    if (!verified.value.ok || verified.value.checked !== events)
      throw new Error('bench: the export does not verify');
    // `audit verify` of the store itself reads every checkpoint's batch the same way.
    const storeVerified = await timed(() => verifySealedLog(store, parseVerifierKey(key.verifierKey)));
    if (!storeVerified.value.ok) throw new Error('bench: the store does not verify');
    const bytes = statSync(file).size;
    const perSecond = (ms: number): number => Math.round(events / (ms / 1000));
    console.log(
      JSON.stringify(
        {
          store: url.startsWith('pglite') ? 'pglite' : 'postgres',
          events,
          checkpoints: exported.value.checkpoints,
          lastSealMs: sealed.ms,
          export: { ms: exported.ms, eventsPerSecond: perSecond(exported.ms) },
          verify: { ms: verified.ms, eventsPerSecond: perSecond(verified.ms) },
          storeVerify: { ms: storeVerified.ms, eventsPerSecond: perSecond(storeVerified.ms) },
          fileBytes: bytes,
          bytesPerEvent: Math.round(bytes / events),
          // The process's peak before the export and after the verify: the calls set it.
          peakRssMiB: {
            beforeExport: Math.round(peakBefore / 1024),
            afterVerify: Math.round(process.resourceUsage().maxRSS / 1024),
          },
        },
        null,
        2,
      ),
    );
  } finally {
    await store.close();
    await drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
