/**
 * Child processes of the benchmark (the real proxy binary and the upstream server): started on
 * loopback, port parsed from their listening line, always stopped on exit, error or signal.
 */
import { type ChildProcess, spawn } from 'node:child_process';

/**
 * The authority key of the benchmark's proxies: a gate on PostgreSQL refuses to start without one
 * from outside the database, and a fixed one keeps every run's start alike on both stores.
 */
export const BENCH_AUTHORITY_KEY = 'effectgate-bench-authority-key-0123456789abcdef';

export interface ListeningChild {
  readonly name: string;
  readonly port: number;
  readonly process: ChildProcess;
  /** The last 64 KiB the child wrote to stderr. */
  stderr(): string;
}

export interface SpawnSpec {
  readonly name: string;
  readonly args: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
  /** Matched against stdout; group 1 is the port. */
  readonly listening: RegExp;
  readonly startTimeoutMs?: number;
}

const live = new Set<ChildProcess>();
const TAIL = 64 * 1024;

/** Spawns `node <args>` and resolves once its stdout matches `spec.listening`. */
export function spawnListening(spec: SpawnSpec): Promise<ListeningChild> {
  const child = spawn(process.execPath, [...spec.args], {
    env: { ...process.env, ...spec.env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  live.add(child);
  child.once('exit', () => live.delete(child));
  let out = '';
  let err = '';
  child.stderr?.on('data', (d: Buffer) => {
    err = (err + d.toString()).slice(-TAIL);
  });
  return new Promise<ListeningChild>((resolve, reject) => {
    let done = false;
    const fail = (why: string): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`${spec.name} ${why}\nstdout: ${out}\nstderr: ${err}`));
    };
    const timer = setTimeout(() => fail('did not start in time'), spec.startTimeoutMs ?? 60_000);
    child.stdout?.on('data', (d: Buffer) => {
      out = (out + d.toString()).slice(-TAIL);
      const m = spec.listening.exec(out);
      if (done || m === null) return;
      done = true;
      clearTimeout(timer);
      resolve({ name: spec.name, port: Number(m[1]), process: child, stderr: () => err });
    });
    child.once('error', (e) => fail(`could not be spawned: ${e.message}`));
    child.once('exit', (code, signal) => fail(`exited (${code ?? signal}) before listening`));
  });
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the child is gone. */
export async function stopChild(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.stdin?.end();
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** Stops every child still running. */
export async function stopAllChildren(graceMs = 5_000): Promise<void> {
  await Promise.all([...live].map((c) => stopChild(c, graceMs)));
}

/** Last resort for `process.on('exit')`: synchronous SIGKILL of every child still running. */
export function killAllChildrenNow(): void {
  for (const c of live) c.kill('SIGKILL');
}
