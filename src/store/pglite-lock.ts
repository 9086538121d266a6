import { closeSync, mkdirSync, openSync, readFileSync, realpathSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { EffectgateError } from '../errors.js';

/*
 * PGlite is an embedded, single-process database: two processes opening the same directory would
 * corrupt it. A lock file holding the owner's pid guards the directory. A lock whose pid is no
 * longer alive (crash, kill -9) is stale and taken over, so a crashed gate never needs manual
 * cleanup.
 */

const LOCK_FILE = 'store.lock';

/** Directories locked by this process: our own pid in a lock file is only stale if not listed here. */
const heldHere = new Set<string>();

/** A held directory lock; `release()` removes the lock file. */
export interface DirLock {
  readonly dir: string;
  release(): void;
}

export function lockStoreDir(dir: string): DirLock {
  mkdirSync(dir, { recursive: true });
  const real = realpathSync(dir);
  const path = join(real, LOCK_FILE);
  for (let tries = 0; tries < 5; tries++) {
    try {
      const fd = openSync(path, 'wx', 0o644);
      try {
        writeSync(fd, `${process.pid}\n`);
      } finally {
        closeSync(fd);
      }
      heldHere.add(real);
      return {
        dir: real,
        release(): void {
          heldHere.delete(real);
          try {
            // Only remove our own lock: a takeover may have replaced it if we looked dead.
            if (readOwner(path) === process.pid) unlinkSync(path);
          } catch {
            // Already gone: nothing to release.
          }
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const owner = readOwner(path);
    if (owner !== null && isLive(owner, real)) {
      throw new EffectgateError(
        'EG_ERR_STORE_LOCKED',
        `The embedded store ${real} is already open in process ${owner}${owner === process.pid ? ' (this process)' : ''}. ` +
          'PGlite allows one process per directory: stop that process, or share a PostgreSQL database between ' +
          'processes with --store postgres://… (or DATABASE_URL).',
      );
    }
    // Stale (dead owner, or unreadable): remove it and race for a fresh one. If another process
    // wins that race, the exclusive create above fails for us and we look at its (live) pid.
    try {
      unlinkSync(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
  throw new EffectgateError(
    'EG_ERR_STORE_LOCKED',
    `Could not take the lock ${path}: it keeps changing hands.`,
  );
}

function readOwner(path: string): number | null {
  try {
    const pid = Number.parseInt(readFileSync(path, 'utf8').trim(), 10);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

function isLive(pid: number, dir: string): boolean {
  // Our own pid in the file is a leftover of an earlier process that had the same pid (common in
  // containers, where the gate is often pid 1), unless this process really holds the directory.
  if (pid === process.pid) return heldHere.has(dir);
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists but belongs to another user. It is alive.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
