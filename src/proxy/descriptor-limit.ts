/**
 * The process's own open-file limit (the soft `RLIMIT_NOFILE`, what `ulimit -n` says), which the
 * connection caps must fit under: a connection the caps admit that then finds no descriptor fails
 * with EMFILE, and so does every other request and the store meanwhile. Node has no getrlimit:
 * Linux says it in `/proc/self/limits`; elsewhere a shell started from this process inherits the
 * limit and prints it. Node raises its soft limit to the hard one at start-up, so this is read
 * after that, as the process really runs.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** The soft open-file limit of this process, or `null` when unlimited or it cannot be read. */
export function readDescriptorLimit(): number | null {
  try {
    return parseProcLimits(readFileSync('/proc/self/limits', 'utf8'));
  } catch {
    // Not Linux (or /proc not mounted): ask a shell.
  }
  if (process.platform === 'win32') return null;
  try {
    return parseCount(execFileSync('/bin/sh', ['-c', 'ulimit -n'], { encoding: 'utf8', timeout: 2_000 }));
  } catch {
    return null;
  }
}

/** The soft limit from the "Max open files" row of a `/proc/<pid>/limits` text. */
export function parseProcLimits(text: string): number | null {
  const row = /^Max open files\s+(\S+)/m.exec(text);
  return row === null ? null : parseCount(row[1] ?? '');
}

function parseCount(text: string): number | null {
  const value = text.trim();
  if (!/^\d+$/.test(value)) return null; // `unlimited`, or something unexpected: no limit known
  const count = Number(value);
  return Number.isSafeInteger(count) && count > 0 ? count : null;
}
