import { randomBytes } from 'node:crypto';
import { type FileHandle, open, rename, unlink } from 'node:fs/promises';
import { finished } from 'node:stream/promises';
import { openInspectionStore, resolveStoreUrl, type Store, writeAuditExport } from '../store/index.js';
import { printable } from './cli-text.js';
import { isFsError } from './fs-error.js';

/**
 * `effectgate audit export [--store URL] [--out FILE [--force]]`: the sealed log as JSON Lines
 * (store/audit-export.ts) on stdout, or in FILE (mode 0600, never overwriting one unless
 * `--force`). Exit 0, or 1 saying why (stdout closed early, FILE exists or cannot be made).
 */
export async function exportLog(
  storeFlag: string | undefined,
  out: string | undefined,
  force: boolean,
): Promise<number> {
  if (out === undefined) {
    const store = await openInspectionStore(resolveStoreUrl(storeFlag));
    try {
      await writeAuditExport(store, process.stdout);
      return 0;
    } catch (err) {
      // The reader went away (`| head`): not the store's fault, and nothing left to say on stdout.
      if ((err as NodeJS.ErrnoException).code === 'EPIPE') {
        process.stderr.write('effectgate: audit export: stdout closed before the export ended\n');
        return 1;
      }
      throw err;
    } finally {
      await store.close();
    }
  }
  return exportToFile(storeFlag, out, force);
}

/**
 * Without `--force` FILE is created exclusively (refused at once if it exists). With `--force` the
 * export goes to a fresh file next to it, renamed over FILE once complete, so a failed export never
 * destroys the previous one. Either way the file is created mode 0600 and removed on failure.
 */
async function exportToFile(storeFlag: string | undefined, out: string, force: boolean): Promise<number> {
  const path = force ? `${out}.${process.pid}-${randomBytes(4).toString('hex')}.tmp` : out;
  let handle: FileHandle;
  try {
    handle = await open(path, 'wx', 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
      process.stderr.write(
        `effectgate: ${printable(out)} already exists; not overwriting it (use --force to replace it)\n`,
      );
      return 1;
    }
    if (isFsError(err)) {
      process.stderr.write(`effectgate: cannot create ${printable(out)}: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
  let store: Store | null = null;
  let done = false;
  try {
    store = await openInspectionStore(resolveStoreUrl(storeFlag));
    const stream = handle.createWriteStream();
    const { events, checkpoints } = await writeAuditExport(store, stream);
    stream.end();
    // Written, flushed and the file closed (the stream owns the handle).
    await finished(stream);
    if (force) await rename(path, out);
    done = true;
    process.stdout.write(
      `audit log exported: ${events} event(s) and ${checkpoints} checkpoint(s) to ${printable(out)}\n`,
    );
    return 0;
  } finally {
    if (!done) {
      await handle.close().catch(() => undefined);
      await unlink(path).catch(() => undefined);
    }
    await store?.close();
  }
}
