// `npm run build` step: tsc copies no .sql files, and the store reads its function definitions
// (src/store/functions/*.sql) from beside its compiled module. So every src/**/*.sql goes to the
// same place under dist/, and every dist/**/*.sql that src/ no longer has goes away: a deleted
// function's file left in dist/ would be created again by the built CLI.
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const src = join(root, 'src');
const dist = join(root, 'dist');

/** Relative paths of the .sql files under dir. */
function sqlFiles(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.sql'));
}

const wanted = new Set(sqlFiles(src));
for (const file of sqlFiles(dist)) {
  if (!wanted.has(file)) rmSync(join(dist, file));
}
for (const file of wanted) {
  mkdirSync(dirname(join(dist, file)), { recursive: true });
  copyFileSync(join(src, file), join(dist, file));
}
