import { parseArgs } from 'node:util';
import { PolicyError } from '../errors.js';
import { loadPolicies } from '../policy/index.js';

/** `effectgate policies check DIR`: prints the tools it loaded, or every error with file:line (exit 1). */
export async function runPolicies(argv: readonly string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: { json: { type: 'boolean', default: false } },
  });
  const [sub, dir] = positionals;
  if (sub !== 'check' || dir === undefined) {
    process.stderr.write('usage: effectgate policies check DIR [--json]\n');
    return 2;
  }
  try {
    const set = await loadPolicies(dir);
    if (values.json) {
      const tools = set.tools.map((t) => ({
        id: t.id,
        source: t.source,
        match: t.match.explain(),
        effect: t.effect,
      }));
      process.stdout.write(
        `${JSON.stringify({ ok: true, default: set.default, files: set.files, tools }, null, 2)}\n`,
      );
    } else {
      process.stdout.write(
        `${set.tools.length} tool(s) from ${set.files.length} file(s); default: ${set.default}\n`,
      );
      for (const t of set.tools) {
        const dedupe =
          t.dedupe === null ? 'recognition off' : `key ${t.dedupe.key.map((k) => k.expression).join(', ')}`;
        process.stdout.write(
          `  ${t.id}  ${t.effect}  ${t.match.explain()}  (${dedupe})  ${t.source.file}:${t.source.line}\n`,
        );
      }
    }
    return 0;
  } catch (err) {
    if (err instanceof PolicyError) {
      if (values.json)
        process.stdout.write(`${JSON.stringify({ ok: false, issues: err.issues }, null, 2)}\n`);
      else process.stderr.write(`${err.message}\n${err.issues.length} error(s)\n`);
      return 1;
    }
    throw err;
  }
}
