/**
 * Debian's squid as a reference forward proxy for the ungoverned path: started as a child on
 * loopback with a minimal generated configuration (no cache, no access or store log, its cache
 * log to /dev/null, loopback clients only), on a port picked by binding one first. When squid is
 * not installed it is installed the way the test command installs its Debian prerequisites
 * (scripts/apt-install.mjs: as root, with apt-get); when that is not possible the reference is
 * skipped with the reason.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export interface SquidProxy {
  readonly port: number;
  readonly process: ChildProcess;
  stop(): Promise<void>;
}

export type SquidStart = { readonly squid: SquidProxy } | { readonly skipped: string };

const CANDIDATES = ['/usr/sbin/squid', '/usr/local/sbin/squid', '/usr/bin/squid'];

function findSquid(): string | null {
  return CANDIDATES.find((p) => existsSync(p)) ?? null;
}

/** Installs Debian's squid through scripts/apt-install.mjs; the binary, or why there is none. */
function installSquid(root: string): string | { readonly skipped: string } {
  const found = findSquid();
  if (found !== null) return found;
  if (process.getuid?.() !== 0 || !existsSync('/usr/bin/apt-get'))
    return { skipped: 'squid is not installed and this is not root with apt-get (apt-get install squid)' };
  const script = `import(${JSON.stringify(resolve(root, 'scripts/apt-install.mjs'))}).then((m) => m.aptInstall(['squid'], 'the squid reference'))`;
  spawnSync(process.execPath, ['--input-type=module', '-e', script], { stdio: 'inherit' });
  return findSquid() ?? { skipped: 'apt-get could not install squid' };
}

/** A port free on loopback now: bound, read, released (squid binds it a moment later). */
function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => ok(port));
    });
  });
}

function accepts(port: number): Promise<boolean> {
  return new Promise((ok) => {
    const c = connect(port, '127.0.0.1');
    c.once('connect', () => {
      c.destroy();
      ok(true);
    });
    c.once('error', () => ok(false));
  });
}

function config(port: number, dir: string): string {
  return [
    `http_port 127.0.0.1:${port}`,
    'acl loopback src 127.0.0.1/32',
    'http_access allow loopback',
    'http_access deny all',
    // A forward proxy only: nothing kept, nothing written but its pid.
    'cache deny all',
    'cache_mem 0 MB',
    'access_log none',
    'cache_store_log none',
    'cache_log /dev/null',
    'logfile_rotate 0',
    'netdb_filename none',
    `pid_filename ${join(dir, 'squid.pid')}`,
    `coredump_dir ${dir}`,
    'shutdown_lifetime 0 seconds',
    'workers 1',
    '',
  ].join('\n');
}

/** Starts squid (installing it if it can); resolves once it accepts connections. */
export async function startSquid(root: string): Promise<SquidStart> {
  const bin = installSquid(root);
  if (typeof bin !== 'string') return bin;
  const dir = await mkdtemp(join(tmpdir(), 'eg-bench-squid-'));
  // squid started as root runs as its own user (`proxy` on Debian), which writes the pid file here.
  spawnSync('chmod', ['0777', dir]);
  const port = await freePort();
  const conf = join(dir, 'squid.conf');
  await writeFile(conf, config(port, dir));
  const child = spawn(bin, ['-N', '-f', conf], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const keep = (d: Buffer): void => {
    out = (out + d.toString()).slice(-4096);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise<void>((ok) => child.once('exit', () => ok()));
      child.kill('SIGTERM');
      const hard = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await gone;
      clearTimeout(hard);
    }
    await rm(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) break;
    if (await accepts(port)) return { squid: { port, process: child, stop } };
    await new Promise((r) => setTimeout(r, 100));
  }
  await stop();
  return { skipped: `squid did not start on 127.0.0.1:${port}: ${out.trim().slice(-500) || 'no output'}` };
}
