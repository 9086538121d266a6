/**
 * `npm run fuzz:differential`: the differential check in depth. Every variant (not a sample) of
 * every tool of `policies/` and of every valid policy folder of the tests, against every oracle
 * installed here. Prints, per oracle and folder, how many spellings the framework performed as a
 * governed tool's effect and how the gate answered them, then every failure as a ready-to-paste
 * request; exits 1 when there is one. Bounded: the variants are a fixed list per tool.
 *
 *   npm run fuzz:differential [-- --oracle rails] [-- --folder policies]
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { formatFailures, runDifferential } from '../test/differential/differential-check.js';
import { missingPrerequisite, oracleManifests } from '../test/differential/oracle-process.js';
import { policyFolder } from '../test/differential/tools-under-test.js';

const { values } = parseArgs({ options: { oracle: { type: 'string' }, folder: { type: 'string' } } });
const root = join(import.meta.dirname, '..');
const fixtures = join(root, 'test', 'fixtures');
const folders = [
  policyFolder('policies', join(root, 'policies')),
  policyFolder('differential', join(fixtures, 'differential-policies')),
  policyFolder('fixtures', join(fixtures, 'policies'), ['routes.yaml', 'mcp-tools.yaml']),
  policyFolder('e2e', join(fixtures, 'e2e-policies')),
  policyFolder('unknown', join(fixtures, 'unknown-policies')),
  policyFolder('observation', join(fixtures, 'observation-policies')),
].filter((f) => values.folder === undefined || f.name === values.folder);

let failed = 0;
for (const manifest of oracleManifests()) {
  if (values.oracle !== undefined && manifest.name !== values.oracle) continue;
  const missing = missingPrerequisite(manifest);
  if (missing !== null) {
    console.log(`${manifest.name}: skipped, ${missing}`);
    continue;
  }
  for (const folder of folders) {
    const started = Date.now();
    const r = await runDifferential(manifest, folder);
    const bad = [...r.failures, ...r.blockedCanonical];
    failed += bad.length;
    console.log(
      `${manifest.name} ${folder.name}: ${r.variants} spellings, ${r.effects} performed by the framework, ` +
        `${r.answeredByGate} of those answered by the gate, ${r.failures.length} failures, ` +
        `${r.blockedCanonical.length} canonical requests refused (${Date.now() - started} ms)`,
    );
    if (bad.length > 0) console.log(formatFailures(bad));
  }
}
console.log(failed === 0 ? 'no failures' : `${failed} failures`);
process.exit(failed === 0 ? 0 : 1);
