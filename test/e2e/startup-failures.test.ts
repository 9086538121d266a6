/**
 * Start-up fails cleanly: with `--listen` or `--admin` taken, the real
 * `effectgate proxy` prints one line naming the flag, exits non-zero within seconds, never serves a
 * governed request, and releases the embedded store's lock (the same directory opens again).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';

const BIN = fileURLToPath(new URL('../../bin/effectgate.js', import.meta.url));
const POLICIES = fileURLToPath(new URL('../fixtures/e2e-policies/', import.meta.url));

async function occupy(): Promise<{ server: Server; port: number }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { server, port: address.port };
}

async function runProxy(
  args: readonly string[],
): Promise<{ code: number | null; stdout: string; stderr: string; ms: number }> {
  const started = Date.now();
  const child = spawn(process.execPath, [BIN, 'proxy', ...args], {
    env: { ...process.env, EFFECTGATE_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => {
    stdout += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearTimeout(killer);
  return { code, stdout, stderr, ms: Date.now() - started };
}

describe('effectgate proxy start-up failures', () => {
  let dir: string;
  let taken: { server: Server; port: number };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'effectgate-startup-'));
    taken = await occupy();
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => taken.server.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  for (const flag of ['--listen', '--admin'] as const) {
    it(`${flag} taken: one clear line, exit 1, nothing served, the store released`, async () => {
      const store = `pglite:${join(dir, flag.slice(2))}`;
      const listen = flag === '--listen' ? `127.0.0.1:${taken.port}` : '127.0.0.1:0';
      const admin = flag === '--admin' ? `127.0.0.1:${taken.port}` : '127.0.0.1:0';
      const r = await runProxy([
        '--listen',
        listen,
        '--admin',
        admin,
        '--policies',
        POLICIES,
        '--store',
        store,
      ]);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain(
        `effectgate: EG_ERR_CONFIG_INVALID: ${flag} 127.0.0.1:${taken.port}: address already in use`,
      );
      expect(r.stdout).not.toContain('listening');
      // It exited on its own (not the 30 s kill) and left the embedded store unlocked.
      expect(r.ms).toBeLessThan(25_000);
      const reopened = await openStore({ url: store });
      await reopened.close();
    }, 60_000);
  }
});
