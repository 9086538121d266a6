import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { openStore } from '../../../src/store/index.js';
import { verifyStoreChain } from '../../../src/store/store-events.js';
import type { Store } from '../../../src/store/types.js';
import { expectVerdict, newKey, newRun, outcome, reserve } from './inputs.js';

const HOLDER = fileURLToPath(new URL('./fixtures/hold-store.ts', import.meta.url));

/** Starts another process holding the store open; resolves once it is open. */
function holdInAnotherProcess(dir: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', HOLDER, dir], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      if (out.includes('ready')) resolve(child);
    });
    child.stderr.on('data', (b: Buffer) => {
      err += b.toString();
    });
    child.on('exit', (code) => reject(new Error(`holder exited with ${code}: ${err}`)));
  });
}

function killed(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

describe('embedded PGlite directory', () => {
  const dirs: string[] = [];
  const open: Store[] = [];
  const children: ChildProcess[] = [];

  function tempDir(): string {
    const dir = mkdtempSync(join(tmpdir(), 'effectgate-store-'));
    dirs.push(dir);
    return join(dir, 'store'); // not yet existing: openStore creates it
  }

  afterEach(async () => {
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) await killed(c);
    for (const s of open.splice(0)) await s.close();
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it('persists across close and reopen', async () => {
    const dir = tempDir();
    const first = await openStore({ url: `pglite:${dir}` });
    expect(first.kind).toBe('pglite');
    const key = newKey({ windowMs: null });
    const allow = await first.decide(reserve(newRun(), key));
    expectVerdict(allow, 'allow');
    await first.recordOutcome(outcome(allow, key, 'succeeded'));
    const heads = await first.chainHeads();
    await first.close();
    expect(existsSync(join(dir, 'store.lock'))).toBe(false);

    const again = await openStore({ url: `pglite:${dir}` });
    open.push(again);
    expect((await again.getOperation(allow.operationId))?.state).toBe('succeeded');
    expect(await again.chainHeads()).toEqual(heads);
    expectVerdict(await again.decide(reserve(newRun(), key)), 'duplicate');
    expect(await verifyStoreChain(again)).toMatchObject({ ok: true });
  });

  it('refuses a second opener while the first process lives, and takes over its stale lock after it died', async () => {
    const dir = tempDir();
    const holder = await holdInAnotherProcess(dir);
    children.push(holder);
    expect(readFileSync(join(dir, 'store.lock'), 'utf8').trim()).toBe(String(holder.pid));

    const refused = openStore({ url: `pglite:${dir}` });
    await expect(refused).rejects.toMatchObject({
      code: 'EG_ERR_STORE_LOCKED',
      message: expect.stringContaining(`process ${holder.pid}`),
    });
    await expect(refused).rejects.toThrow(/--store postgres:\/\//);

    await killed(holder); // kill -9: the lock file stays behind, naming a dead pid
    expect(existsSync(join(dir, 'store.lock'))).toBe(true);
    const store = await openStore({ url: `pglite:${dir}` });
    open.push(store);
    await store.ping();
    expect(readFileSync(join(dir, 'store.lock'), 'utf8').trim()).toBe(String(process.pid));
  }, 60_000);

  it('refuses a second open of the same directory within one process', async () => {
    const dir = tempDir();
    const store = await openStore({ url: `pglite:${dir}` });
    open.push(store);
    await expect(openStore({ url: `pglite:${dir}` })).rejects.toMatchObject({ code: 'EG_ERR_STORE_LOCKED' });
    await store.ping(); // the refused opener did not disturb the holder
  });

  it('takes over a lock file naming this pid when this process does not hold it (pid reuse)', async () => {
    const dir = tempDir();
    const first = await openStore({ url: `pglite:${dir}` });
    await first.close();
    writeFileSync(join(dir, 'store.lock'), `${process.pid}\n`);
    const store = await openStore({ url: `pglite:${dir}` });
    open.push(store);
    await store.ping();
  });
});
