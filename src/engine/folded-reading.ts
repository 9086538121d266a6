import { compileJsonPath, foldName } from '../policy/index.js';
import type { ArgumentDocument } from './argument-document.js';

/**
 * A body as a case-insensitive binder reads it (Go's encoding/json into a struct, ASP.NET's
 * default JSON binding): every member name folded (`foldName`). Two names that fold together were
 * already refused as a duplicate by the scan (`json-scan.ts`), so folding loses nothing here.
 */
export function foldNames(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(foldNames);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const [k, v] of Object.entries(value)) out[foldName(k)] = foldNames(v);
  return out;
}

/**
 * The first of `missing` (key paths of a tool that found nothing) that finds a value once member
 * names are folded, or null. `{"Title": "x"}` has no `$.body.title` to the gate, but a Go handler
 * binds it as `title`: letting it out under `on_missing: allow` (ungoverned), or keying it apart,
 * would let the destination act on an argument the gate did not read.
 */
export function keyPathReachedByFolding(args: ArgumentDocument, missing: readonly string[]): string | null {
  if (args.body === undefined || args.body === null || typeof args.body !== 'object') return null;
  const folded = { path: args.path, query: args.query, body: foldNames(args.body) };
  for (const expression of missing) {
    if (!expression.startsWith('$.body') && !expression.startsWith("$['body']")) continue;
    const found = compileJsonPath(foldName(expression)).evaluate(folded);
    if (found.some((v) => v !== undefined)) return expression;
  }
  return null;
}
