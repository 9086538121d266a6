/**
 * The embedded store's socket: a gate holding a `pglite:DIR` store serves it on DIR/gate.sock, so
 * inspection and approval commands work while the gate runs (docs/design.md §4.4), without the hot path.
 */
import { existsSync, mkdtempSync, readdirSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  connectStoreSocket,
  openInspectionStore,
  openStore,
  type Store,
  type StoreSocketServer,
  serveStoreSocket,
  uuidv7,
} from '../../../src/store/index.js';
import { MAX_SOCKET_PATH_BYTES } from '../../../src/store/socket-path.js';
import { expectVerdict, newKey, newRun, outcome, reserve } from './inputs.js';

describe('store socket of an embedded store', () => {
  let dir: string;
  let store: Store;
  let server: StoreSocketServer;
  let opId: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'eg-socket-'));
    store = await openStore({ url: `pglite:${dir}` });
    server = await serveStoreSocket(store, dir, { instanceId: 'serving-gate' });
    const key = newKey();
    const first = await store.decide(reserve(newRun(), key, { gateInstance: 'serving-gate' }));
    expectVerdict(first, 'allow');
    opId = first.operationId;
  });

  afterAll(async () => {
    await server?.close();
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is a 0600 socket inside the store directory', () => {
    const st = statSync(server.path);
    expect(st.isSocket()).toBe(true);
    expect(st.mode & 0o777).toBe(0o600);
    expect(server.path).toBe(join(dir, 'gate.sock'));
  });

  it('lets a command that finds the directory locked read through the running gate', async () => {
    const remote = await openInspectionStore(`pglite:${dir}`);
    const ops = await remote.listOperations({ state: 'open' });
    expect(ops.map((o) => o.id)).toEqual([opId]);
    expect(await remote.countOperations()).toEqual({ open: 1 });
    expect(await remote.countDuplicates([opId])).toEqual({});
    expect((await remote.getOperation(opId))?.attempts).toHaveLength(1);
    expect(await remote.chainHeads()).toHaveLength(64);
    await remote.close();
  });

  it('many calls on one kept-alive connection leave no listener behind', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error): void => {
      warnings.push(`${w.name}: ${w.message}`);
    };
    process.on('warning', onWarning);
    try {
      const remote = connectStoreSocket(dir);
      for (let i = 0; i < 15; i++) await remote.chainHeads();
      await remote.close();
      // Warnings are emitted on the next tick.
      await new Promise((r) => setImmediate(r));
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.filter((w) => w.includes('MaxListenersExceeded'))).toEqual([]);
  });

  it('carries stable error codes back to the caller', async () => {
    const remote = connectStoreSocket(dir);
    await expect(
      remote.decideApproval({ approvalId: uuidv7(), action: 'approve', by: 'alice', reason: 'r' }),
    ).rejects.toMatchObject({ code: 'EG_ERR_NOT_FOUND' });
  });

  it('never serves the hot path nor migrations', async () => {
    const remote = connectStoreSocket(dir);
    await expect(remote.decide(reserve(newRun(), newKey()))).rejects.toMatchObject({
      code: 'EG_ERR_STORE_LOCKED',
    });
    await expect(remote.migrate()).rejects.toMatchObject({ code: 'EG_ERR_STORE_LOCKED' });
    expect((await store.listOperations()).length).toBe(1);
  });

  it('never lets a recovery through the socket touch the serving gate’s own in-flight attempt', async () => {
    const remote = connectStoreSocket(dir);
    const recovered = await remote.recover({ instanceId: null, exclusive: true, staleAfterMs: 1, rules: {} });
    expect(recovered).toEqual([]);
    expect((await store.getOperation(opId))?.state).toBe('open');
    // A dead gate's attempt, by contrast, is recovered.
    const key = newKey();
    const orphan = await store.decide(reserve(newRun(), key, { gateInstance: 'dead-gate' }));
    expectVerdict(orphan, 'allow');
    await store.registerInstance('dead-gate');
    await store.stopInstance('dead-gate');
    const again = await remote.recover({ instanceId: null, exclusive: true, staleAfterMs: 1, rules: {} });
    expect(again.map((r) => r.attemptId)).toEqual([orphan.attemptId]);
    await store.recordOutcome(outcome(orphan, key, 'succeeded'));
  });

  it('refuses a method it does not serve and a body that is not a call', async () => {
    const { request } = await import('node:http');
    const status = await new Promise<number>((resolve, reject) => {
      const req = request({ socketPath: server.path, method: 'POST', path: '/rpc' }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end(JSON.stringify({ method: 'close', args: [] }));
    });
    expect(status).toBe(400);
    await store.ping();
  });
});

describe.skipIf(process.platform !== 'linux')(
  'store socket of an embedded store under a long path (linux)',
  () => {
    it('is served in the store directory itself, reached from a command, and removed at close without a handle left open', async () => {
      const base = mkdtempSync(join(tmpdir(), 'eg-socket-long-'));
      const dir = join(base, 'd'.repeat(100));
      /** This process's open handles on the store directory itself (not on the files in it). */
      const handlesOnDir = (): number =>
        readdirSync('/proc/self/fd').filter((fd) => {
          try {
            return readlinkSync(`/proc/self/fd/${fd}`) === dir;
          } catch {
            return false; // closed meanwhile (the readdir's own handle)
          }
        }).length;
      const store = await openStore({ url: `pglite:${dir}` });
      try {
        expect(Buffer.byteLength(join(dir, 'gate.sock'))).toBeGreaterThan(MAX_SOCKET_PATH_BYTES);
        const server = await serveStoreSocket(store, dir, { instanceId: 'serving-gate' });
        expect(server.path).toBe(join(dir, 'gate.sock'));
        const st = statSync(server.path);
        expect(st.isSocket()).toBe(true);
        expect(st.mode & 0o777).toBe(0o600);
        // Nothing bound at a path cut short to fit.
        expect(readdirSync(base)).toEqual(['d'.repeat(100)]);
        const remote = connectStoreSocket(dir);
        await remote.ping();
        expect(await remote.countOperations()).toEqual({});
        await server.close();
        expect(existsSync(server.path)).toBe(false);
        expect(handlesOnDir()).toBe(0);
      } finally {
        await store.close();
        rmSync(base, { recursive: true, force: true });
      }
    });
  },
);
