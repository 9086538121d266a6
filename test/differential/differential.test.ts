/**
 * The gate's reading is at least as wide as the destinations' (docs/security.md, "The reading
 * rule"), checked against real server frameworks: for every tool of `policies/` and of the
 * spelling fixtures, spellings of its call go to each oracle directly and through the gate, and the
 * oracle's own answers judge (see `differential-check.ts`). A seeded half of the variants runs
 * here (`DIFFERENTIAL_SEED` picks another half; the seed is in every failure's title);
 * `npm run fuzz:differential` runs them all, over every policy folder of the tests too.
 * An oracle whose framework is not installed reports itself skipped, with the reason.
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { formatFailures, runDifferential } from './differential-check.js';
import { missingPrerequisite, oracleManifests } from './oracle-process.js';
import { policyFolder } from './tools-under-test.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const seed = process.env['DIFFERENTIAL_SEED'] ?? 'npm-test';
const folders = [
  policyFolder('policies', join(root, 'policies')),
  policyFolder('differential', join(root, 'test', 'fixtures', 'differential-policies')),
];

describe('differential: the gate reads at least as widely as the destination frameworks', () => {
  for (const manifest of oracleManifests()) {
    const missing = missingPrerequisite(manifest);
    if (missing !== null) {
      it.skip(`${manifest.name}: skipped, ${missing}`, () => undefined);
      continue;
    }
    for (const folder of folders) {
      it(`${manifest.name} (${manifest.reads.split(/[:(,]/)[0]?.trim()}) on ${folder.name}/, seed ${seed}`, async () => {
        const report = await runDifferential(manifest, folder, { sample: { seed, fraction: 0.5 } });
        // The oracle really performed effects: a broken oracle must not pass by doing nothing.
        expect(report.effectKinds).toContain('plain');
        expect(formatFailures(report.blockedCanonical), 'canonical requests the gate refused').toBe('');
        expect(formatFailures(report.failures), 'spellings that made the destination act past the gate').toBe(
          '',
        );
      }, 180_000);
    }
  }
});
