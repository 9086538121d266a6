import { archiveAndPrune, openInspectionStore, resolveStoreUrl } from '../store/index.js';
import { printable } from './cli-text.js';
import { isFsError } from './fs-error.js';

/**
 * `effectgate audit prune --before TIME --archive FILE [--store URL] [--json]`: retention
 * (store/audit-retention.ts). Exit 0, or 1 with nothing removed when the archive cannot be written
 * or does not verify, or a running gate holds the embedded store.
 */
export async function prune(
  storeFlag: string | undefined,
  before: Date,
  archive: string,
  json: boolean,
): Promise<number> {
  const store = await openInspectionStore(resolveStoreUrl(storeFlag));
  try {
    // A running gate's store socket serves reads, never a removal.
    if (typeof store.pruneChain !== 'function') {
      process.stderr.write(
        'effectgate: audit prune cannot run while a gate holds this embedded store (its store socket serves no removal): stop the gate, then prune\n',
      );
      return 1;
    }
    const result = await archiveAndPrune(store, before, archive);
    const written = result.cuts.length > 0;
    if (json) process.stdout.write(`${JSON.stringify({ archive: written ? archive : null, ...result })}\n`);
    else if (!written)
      process.stdout.write(
        `audit log not pruned: no checkpoint sealed before ${before.toISOString()} is past the last prune; no archive written\n`,
      );
    else
      process.stdout.write(
        `audit log pruned: ${result.archived} event(s) ${result.checkpoint === null ? 'recorded' : `sealed (up to checkpoint ${result.checkpoint})`} before ${before.toISOString()} archived to ${printable(archive)} (verified) and ${result.removed} removed, over ${result.chains} chain(s)\n`,
      );
    return result.removed === result.archived ? 0 : 1;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
      process.stderr.write(
        `effectgate: ${printable(archive)} already exists; an archive is never overwritten\n`,
      );
      return 1;
    }
    if (isFsError(err)) {
      process.stderr.write(`effectgate: cannot write ${printable(archive)}: ${err.message}\n`);
      return 1;
    }
    throw err;
  } finally {
    await store.close();
  }
}

/**
 * An ISO 8601 instant with its zone (`Z` or `±hh:mm`): a time without one would be read in the
 * machine's zone, and a date that does not exist (2026-02-30) would roll over into another.
 */
export function isoInstant(text: string): Date | null {
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?)?(Z|[+-]\d{2}:\d{2})$/.exec(
    text,
  );
  if (m === null || m[1] === '0000') return null;
  const zone = m[7]!;
  const date = new Date(m[4] === undefined ? `${m[1]}-${m[2]}-${m[3]}T00:00:00${zone}` : text);
  if (Number.isNaN(date.getTime())) return null;
  // The calendar fields as written, in the zone written, must come back unchanged.
  const offsetMin =
    zone === 'Z'
      ? 0
      : (zone.startsWith('-') ? -1 : 1) * (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4)));
  const local = new Date(date.getTime() + offsetMin * 60_000);
  const same =
    local.getUTCFullYear() === Number(m[1]) &&
    local.getUTCMonth() + 1 === Number(m[2]) &&
    local.getUTCDate() === Number(m[3]) &&
    (m[4] === undefined || (local.getUTCHours() === Number(m[4]) && local.getUTCMinutes() === Number(m[5])));
  return same ? date : null;
}
