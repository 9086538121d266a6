import { parseArgs } from 'node:util';
import { openInspectionStore, resolveStoreUrl, verifyStoreChain } from '../store/index.js';

/**
 * `effectgate audit verify [--store URL] [--json]`: exit 0 when every chain is intact, 1 naming the
 * first bad event of each broken chain.
 */
export async function runAudit(argv: readonly string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: { store: { type: 'string' }, json: { type: 'boolean', default: false } },
  });
  if (positionals[0] !== 'verify') {
    process.stderr.write('usage: effectgate audit verify [--store URL] [--json]\n');
    return 2;
  }
  const store = await openInspectionStore(resolveStoreUrl(values.store));
  try {
    const report = await verifyStoreChain(store);
    if (values.json) process.stdout.write(`${JSON.stringify(report)}\n`);
    else if (report.ok)
      process.stdout.write(`audit chain intact: ${report.checked} event(s) on ${report.chains} chain(s)\n`);
    else
      for (const bad of report.broken)
        process.stdout.write(
          `audit chain BROKEN at chain ${bad.chain} event seq ${bad.seq}: ${bad.reason}\n`,
        );
    return report.ok ? 0 : 1;
  } finally {
    await store.close();
  }
}
