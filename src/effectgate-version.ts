import { readFileSync } from 'node:fs';

let cached: string | undefined;

/**
 * effectgate's own version, from its package.json: one folder up from this module in src/ and in
 * dist/ alike. Read once, when first asked (`--version`, the trace resource, the store's record of
 * which version migrated it).
 */
export function effectgateVersion(): string {
  if (cached === undefined) {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      readonly version: string;
    };
    cached = pkg.version;
  }
  return cached;
}
