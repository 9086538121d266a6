/**
 * An embedded store under a long directory path. A Unix socket's path holds 107 bytes at most on
 * Linux (sun_path is 108 with its NUL), and the gate serves its store on DIR/gate.sock: under a
 * deep directory that path does not fit. The inspection commands must still reach the running
 * gate (not report a misleading "store locked"), and the gate must stop on its first SIGTERM.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORE_SOCKET } from '../../src/store/index.js';
import { type ProxyProcess, runCli, startProxyProcess } from '../helpers/proxy-process.js';

const POLICIES = new URL('../fixtures/e2e-policies/', import.meta.url).pathname;

/** sun_path on Linux: 108 bytes with the terminating NUL. */
const SUN_PATH = 108;

describe('an embedded store whose socket path is longer than a Unix socket address holds', () => {
  let base: string;
  let storeDir: string;
  let proxy: ProxyProcess | undefined;

  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), 'effectgate-long-'));
    // Two levels of 60 characters: the socket path is well over sun_path wherever tmpdir is.
    storeDir = join(base, 'a'.repeat(60), 'b'.repeat(60), 'store');
    mkdirSync(storeDir, { recursive: true });
  });

  afterAll(async () => {
    await proxy?.stop('SIGKILL');
    rmSync(base, { recursive: true, force: true });
  });

  it('serves inspection commands while the gate runs, and the gate stops on its first SIGTERM', {
    timeout: 120_000,
  }, async () => {
    const socketPath = join(storeDir, STORE_SOCKET);
    expect(Buffer.byteLength(socketPath)).toBeGreaterThan(SUN_PATH + 20);
    const store = `pglite:${storeDir}`;
    proxy = await startProxyProcess(['--policies', POLICIES, '--store', store]);

    const ops = await runCli(['operations', '--store', store, '--json']);
    expect(ops.stderr).toBe('');
    expect(ops.code).toBe(0);
    expect(JSON.parse(ops.stdout)).toMatchObject({ operations: [] });
    // The same guarantee as a short path: a socket file only the gate's user may use.
    const st = statSync(socketPath);
    expect(st.isSocket()).toBe(true);
    expect(st.mode & 0o777).toBe(0o600);
    // Nothing bound at a path cut short to fit (a stray socket beside the store's parents);
    // beside the store only its keys directory, which holds the keys kept out of the database.
    expect(readdirSync(join(base, 'a'.repeat(60)))).toEqual(['b'.repeat(60)]);
    expect(readdirSync(join(base, 'a'.repeat(60), 'b'.repeat(60))).sort()).toEqual(['store', 'store.keys']);

    const { child } = proxy;
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    // Bounded: a gate that ignored the signal is killed by afterAll and this fails.
    const code = await Promise.race([
      exited,
      new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), 20_000)),
    ]);
    expect(code).toBe(0);
  });
});
