/**
 * Who used the CPUs while a scenario ran (Linux /proc only; `null` elsewhere). "Ours" is this
 * process and all its descendants (proxy, upstream, tsx's esbuild) plus the PostgreSQL server
 * processes; "other" is everything else that ran on the machine, e.g. another session's test
 * suite. On a shared 2-core box a large "other" figure means that scenario's numbers are noise.
 */
import { readdirSync, readFileSync } from 'node:fs';

export interface CpuSnapshot {
  readonly at: number;
  /** user + nice + system jiffies of the whole machine. */
  readonly machine: number;
  readonly steal: number;
  /** utime + stime jiffies per pid of ours. */
  readonly ours: ReadonlyMap<number, number>;
  /** The PostgreSQL server processes among `ours`. */
  readonly postgres: ReadonlySet<number>;
}

export interface CpuUse {
  /** Cores used by the benchmark's own processes (load generator, proxy, upstream, PostgreSQL). */
  readonly oursCores: number;
  /** Cores used by anything else on the machine. */
  readonly otherCores: number;
  readonly stealCores: number;
  /** Of `oursCores`: the PostgreSQL server processes (every backend, the WAL writer, the checkpointer). */
  readonly postgresCores: number;
  /** Of `oursCores`: the process under test (the proxy), when its pid was given. */
  readonly subjectCores: number | null;
  /** The wall-clock length of the window measured. */
  readonly seconds: number;
}

const HZ = 100;

interface ProcStat {
  readonly ppid: number;
  readonly jiffies: number;
}

function readProc(pid: number): ProcStat | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(f[1]), jiffies: Number(f[11]) + Number(f[12]) };
  } catch {
    return null;
  }
}

function isPostgres(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('postgres');
  } catch {
    return false;
  }
}

export function cpuSnapshot(): CpuSnapshot | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).map(Number);
    const [, user = 0, nice = 0, system = 0, , , , , steal = 0] = line;
    const procs = new Map<number, ProcStat>();
    for (const name of readdirSync('/proc')) {
      if (!/^\d+$/.test(name)) continue;
      const st = readProc(Number(name));
      if (st !== null) procs.set(Number(name), st);
    }
    const ours = new Map<number, number>();
    const postgres = new Set<number>();
    const mine = (pid: number): boolean => {
      for (let p = pid, hops = 0; p > 1 && hops < 64; hops++) {
        if (p === process.pid) return true;
        p = procs.get(p)?.ppid ?? 0;
      }
      return false;
    };
    for (const [pid, st] of procs) {
      if (isPostgres(pid)) postgres.add(pid);
      if (mine(pid) || postgres.has(pid)) ours.set(pid, st.jiffies);
    }
    return { at: performance.now(), machine: user + nice + system, steal, ours, postgres };
  } catch {
    return null;
  }
}

export function cpuUse(a: CpuSnapshot | null, b: CpuSnapshot | null, subjectPid?: number): CpuUse | null {
  if (a === null || b === null) return null;
  const seconds = (b.at - a.at) / 1000;
  let ours = 0;
  let postgres = 0;
  // A process that started in between counts whole; one that ended in between is lost (small).
  for (const [pid, j] of b.ours) {
    const used = j - (a.ours.get(pid) ?? 0);
    ours += used;
    if (b.postgres.has(pid)) postgres += used;
  }
  const subject =
    subjectPid === undefined ? null : (b.ours.get(subjectPid) ?? 0) - (a.ours.get(subjectPid) ?? 0);
  const machine = b.machine - a.machine;
  return {
    oursCores: ours / HZ / seconds,
    otherCores: Math.max(0, machine - ours) / HZ / seconds,
    stealCores: (b.steal - a.steal) / HZ / seconds,
    postgresCores: postgres / HZ / seconds,
    subjectCores: subject === null ? null : subject / HZ / seconds,
    seconds,
  };
}
