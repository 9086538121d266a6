/**
 * Starting and stopping the oracle servers (`oracles/<name>/oracle.json`, protocol in
 * `oracles/README.md`). An oracle whose executables are missing is not started: its suite reports
 * itself skipped with the reason (`scripts/ensure-oracles.mjs` installs them where it can).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ORACLES_DIR = join(dirname(fileURLToPath(import.meta.url)), 'oracles');

export interface OracleManifest {
  readonly name: string;
  readonly reads: string;
  readonly debian: readonly string[];
  readonly requires: readonly string[];
  readonly command: readonly string[];
  readonly dir: string;
}

/** One route of an oracle's routes file. */
export interface OracleRoute {
  readonly name: string;
  readonly method: string;
  readonly path: string;
  readonly body_fields: readonly string[];
}

export function oracleManifests(): OracleManifest[] {
  return readdirSync(ORACLES_DIR, { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(join(ORACLES_DIR, d.name, 'oracle.json')))
    .map((d) => {
      const dir = join(ORACLES_DIR, d.name);
      return { ...(JSON.parse(readFileSync(join(dir, 'oracle.json'), 'utf8')) as OracleManifest), dir };
    })
    .sort((a, b) => a.name.localeCompare(b.name));
}

/** Why the oracle cannot run here (a missing executable), or null. */
export function missingPrerequisite(manifest: OracleManifest): string | null {
  for (const exe of manifest.requires) {
    if (exe.startsWith('/')) {
      if (!existsSync(exe)) return `${exe} is not installed (Debian: ${manifest.debian.join(' ')})`;
      continue;
    }
    try {
      execFileSync('sh', ['-c', `command -v ${exe}`], { stdio: 'ignore' });
    } catch {
      return `${exe} is not on PATH (Debian: ${manifest.debian.join(' ') || 'none'})`;
    }
  }
  return null;
}

export interface RunningOracle {
  readonly manifest: OracleManifest;
  readonly port: number;
  stderr(): string;
  stop(): Promise<void>;
}

/** A free loopback port (bound then released: the oracle binds it right after). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Starts the oracle with `routes`; resolves once it printed `ORACLE READY` (at most `timeoutMs`). */
export async function startOracle(
  manifest: OracleManifest,
  routes: readonly OracleRoute[],
  timeoutMs = 60_000,
): Promise<RunningOracle> {
  const routesFile = join(tmpdir(), `effectgate-oracle-${manifest.name}-${process.pid}-${Date.now()}.json`);
  writeFileSync(routesFile, JSON.stringify({ routes }));
  // A port taken between freePort() and the oracle's bind fails the start: try a few times.
  let lastError: unknown = null;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    try {
      return await spawnOracle(manifest, routesFile, port, timeoutMs);
    } catch (err) {
      lastError = err;
    }
  }
  throw lastError;
}

function spawnOracle(
  manifest: OracleManifest,
  routesFile: string,
  port: number,
  timeoutMs: number,
): Promise<RunningOracle> {
  const [command, ...args] = manifest.command;
  const child: ChildProcess = spawn(command!, args, {
    cwd: manifest.dir,
    env: { ...process.env, ORACLE_PORT: String(port), ORACLE_ROUTES: routesFile },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let err = '';
  child.stderr!.on('data', (c: Buffer) => {
    err = (err + c.toString()).slice(-20_000);
  });
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    try {
      process.kill(-child.pid!, 'SIGTERM');
    } catch {
      child.kill('SIGTERM');
    }
    const killer = setTimeout(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    }, 5_000);
    await exited;
    clearTimeout(killer);
  };
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      void stop();
      reject(new Error(`oracle ${manifest.name} not ready within ${timeoutMs} ms\n${err}`));
    }, timeoutMs);
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('ORACLE READY')) {
        clearTimeout(timer);
        resolve({ manifest, port, stderr: () => err, stop });
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`oracle ${manifest.name} exited (${code}) before it was ready\n${err}`));
    });
  });
}
