/**
 * Where the gate's authority key (the HMAC key of credential fingerprints) comes from when none is
 * given (src/engine/authority-key.ts): a key file beside an embedded store, made once and kept
 * across restarts; an older store's key moved out of the database into it, so the trail's
 * references keep matching; on PostgreSQL a refusal saying what to do. Real stores, a real loopback
 * destination, undici.
 */
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { uuidv7 } from '../../../src/store/index.js';
import { openKyselyStore } from '../../../src/store/open-store.js';
import { gateInterceptor } from '../../../src/undici/index.js';
import { openTestStore, storeTargets } from '../../helpers/store.js';
import { reply, startUpstream, type Upstream } from '../../helpers/upstream.js';

const policies = parsePolicyFiles([
  {
    file: 'inline.yaml',
    text: `
version: 1
tools:
  - id: t.create
    match: { hosts: [127.0.0.1], method: POST, path: /effects }
    effect: create
    dedupe: { key: [$.body.order], window: 1h, wait: 0s, pending_ttl: 10s }
`,
  },
]);
const scope = { tenant: 'acme', area: 'ops', agent: 'bot' };
const CREDENTIAL = 'Bearer sk-live-guessable';
const LEGACY_KEY = 'a1'.repeat(32);

describe('the authority key', { timeout: 120_000 }, () => {
  let upstream: Upstream;
  const agent = new Agent();
  let saved: string | undefined;
  let root: string;

  beforeAll(async () => {
    upstream = await startUpstream(reply(201, { ok: true }));
  });
  afterAll(async () => {
    await agent.close();
    await upstream?.close();
  });
  beforeEach(() => {
    // The defaults under test: no key from the environment (the suite sets one on PostgreSQL).
    saved = process.env['EFFECTGATE_AUTHORITY_KEY'];
    delete process.env['EFFECTGATE_AUTHORITY_KEY'];
    root = mkdtempSync(join(tmpdir(), 'effectgate-authority-'));
  });
  afterEach(() => {
    if (saved !== undefined) process.env['EFFECTGATE_AUTHORITY_KEY'] = saved;
    rmSync(root, { recursive: true, force: true });
  });

  /** Sends one governed call with the credential; answers the authority reference the trail keeps. */
  async function fingerprint(gate: Gate): Promise<string | null> {
    const order = `order-${uuidv7()}`;
    const r = await request(`${upstream.url}/effects`, {
      dispatcher: agent.compose(gateInterceptor(gate, { run: `run-${uuidv7()}` })),
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: CREDENTIAL },
      body: JSON.stringify({ order }),
    });
    expect(r.statusCode).toBe(201);
    await r.body.dump();
    const ops = await gate.store.listOperations({ toolId: 't.create' });
    const mine = ops.find((o) => JSON.stringify(o.keyValues) === JSON.stringify([order]));
    return mine?.attempts[0]?.request.authorityRef ?? null;
  }

  async function storedKeyRows(url: string): Promise<number> {
    const store = await openKyselyStore({ url });
    try {
      const rows = await store.db
        .selectFrom('settings')
        .select('value')
        .where('name', '=', 'authority_key')
        .execute();
      return rows.length;
    } finally {
      await store.close();
    }
  }

  it('on an embedded store: a key file made beside it, 0600, the same fingerprints after a restart, none in the database', async () => {
    const url = `pglite:${join(root, 'store')}`;
    const warnings: string[] = [];
    const logger = { info() {}, error() {}, warn: (_f: unknown, m: string) => void warnings.push(m) };
    const first = await createGate({ policies, scope, store: url, logger });
    const before = await fingerprint(first);
    await first.close();
    const path = join(root, 'store.keys', 'authority.key');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(root, 'store.keys')).mode & 0o777).toBe(0o700);
    const key = readFileSync(path, 'utf8');
    expect(key).toMatch(/^[0-9a-f]{64}\n$/);
    // A fresh store's migration key was never used: dropped, not moved (this is a new key).
    expect(before).toMatch(/^authorization:hmac-sha256:[0-9a-f]{32}$/);
    expect(await storedKeyRows(url)).toBe(0);

    const second = await createGate({ policies, scope, store: url, logger });
    expect(await fingerprint(second)).toBe(before);
    await second.close();
    expect(readFileSync(path, 'utf8')).toBe(key);
    // The key is outside the database: nothing to warn about.
    expect(warnings).toEqual([]);
  });

  it('an older store keeps its key: moved to the file, deleted from the database, references still match', async () => {
    const url = `pglite:${join(root, 'store')}`;
    // The older version: fingerprints keyed with the key kept in settings.
    // (No audit key either: the older version sealed nothing, so made no key folder beside the store.)
    const old = await createGate({ policies, scope, store: url, authorityKey: LEGACY_KEY, auditKey: null });
    const before = await fingerprint(old);
    await old.close();
    const store = await openKyselyStore({ url });
    await store.db.insertInto('settings').values({ name: 'authority_key', value: LEGACY_KEY }).execute();
    await store.close();
    expect(existsSync(join(root, 'store.keys'))).toBe(false);

    const gate = await createGate({ policies, scope, store: url });
    expect(await fingerprint(gate)).toBe(before);
    await gate.close();
    expect(readFileSync(join(root, 'store.keys', 'authority.key'), 'utf8')).toBe(`${LEGACY_KEY}\n`);
    expect(await storedKeyRows(url)).toBe(0);
  });

  it('a move cut between writing the file and deleting the row is finished at the next start', async () => {
    const url = `pglite:${join(root, 'store')}`;
    // (No audit key either: the older version sealed nothing, so made no key folder beside the store.)
    const old = await createGate({ policies, scope, store: url, authorityKey: LEGACY_KEY, auditKey: null });
    const before = await fingerprint(old);
    await old.close();
    const store = await openKyselyStore({ url });
    await store.db.insertInto('settings').values({ name: 'authority_key', value: LEGACY_KEY }).execute();
    await store.close();
    mkdirSync(join(root, 'store.keys'), { mode: 0o700 });
    writeFileSync(join(root, 'store.keys', 'authority.key'), `${LEGACY_KEY}\n`, { mode: 0o600 });

    const gate = await createGate({ policies, scope, store: url });
    expect(await fingerprint(gate)).toBe(before);
    await gate.close();
    expect(await storedKeyRows(url)).toBe(0);
  });

  it('refuses a key file others can read, naming it, and starts nothing', async () => {
    const url = `pglite:${join(root, 'store')}`;
    await (await createGate({ policies, scope, store: url })).close();
    const path = join(root, 'store.keys', 'authority.key');
    chmodSync(path, 0o644);
    const err = await createGate({ policies, scope, store: url }).catch((e: Error) => e);
    expect(err).toMatchObject({ code: 'EG_ERR_CONFIG_INVALID' });
    expect((err as Error).message).toContain(path);
    // The store was closed again: its lock is free.
    chmodSync(path, 0o600);
    await (await createGate({ policies, scope, store: url })).close();
  });

  it('two gates opening one new embedded store at once: one runs, one is refused, one key', async () => {
    const url = `pglite:${join(root, 'store')}`;
    const results = await Promise.allSettled([
      createGate({ policies, scope, store: url, instanceId: 'a' }),
      createGate({ policies, scope, store: url, instanceId: 'b' }),
    ]);
    const running = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    expect(running).toHaveLength(1);
    const refused = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    expect(refused.reason).toMatchObject({ code: 'EG_ERR_STORE_LOCKED' });
    expect(`${readFileSync(join(root, 'store.keys', 'authority.key'), 'utf8').trim()}`).toBe(
      running[0]!.payloadKey,
    );
    await running[0]!.close();
  });

  it('pglite:memory keeps its key in memory, without a file or a warning', async () => {
    const warnings: string[] = [];
    const logger = { info() {}, error() {}, warn: (_f: unknown, m: string) => void warnings.push(m) };
    const cwd = process.cwd();
    process.chdir(root);
    try {
      const gate = await createGate({ policies, scope, store: 'pglite:memory', logger });
      expect(await fingerprint(gate)).toMatch(/^authorization:hmac-sha256:/);
      await gate.close();
    } finally {
      process.chdir(cwd);
    }
    expect(warnings).toEqual([]);
    expect(existsSync(join(root, '.effectgate.keys'))).toBe(false);
  });

  for (const target of storeTargets().filter((t) => t.kind === 'postgres')) {
    describe('on PostgreSQL', () => {
      it('refuses to start without a key, and says how to make one', async () => {
        const store = await openTestStore(target);
        try {
          const err = await createGate({ policies, scope, store }).catch((e: Error) => e);
          expect(err).toMatchObject({ code: 'EG_ERR_CONFIG_INVALID' });
          expect((err as Error).message).toContain('effectgate keys authority');
          expect((err as Error).message).toContain('--authority-key-file');
        } finally {
          await store.close();
        }
      });

      it('with a legacy key in use: refuses, naming the export; started with that key, deletes it; references match', async () => {
        const store = await openTestStore(target);
        try {
          // The older version: fingerprints keyed with the key it kept in settings.
          const gate1 = await createGate({
            policies,
            scope,
            store,
            authorityKey: LEGACY_KEY,
            instanceId: 'pg-1',
          });
          // Migration 0002's key, never used: dropped at this first start.
          expect(await store.storedAuthorityKey()).toBeNull();
          const before = await fingerprint(gate1);
          await gate1.close();
          await store.query(`insert into settings (name, value) values ('authority_key', '${LEGACY_KEY}')`);

          const err = await createGate({ policies, scope, store }).catch((e: Error) => e);
          expect(err).toMatchObject({ code: 'EG_ERR_CONFIG_INVALID' });
          expect((err as Error).message).toContain('still holds the authority key an older version kept');
          expect((err as Error).message).toContain('effectgate keys authority');

          const warnings: string[] = [];
          const logger = { info() {}, error() {}, warn: (_f: unknown, m: string) => void warnings.push(m) };
          // Another key while the old one keyed the trail: kept, with a warning (still unsafe).
          const other = await createGate({ policies, scope, store, authorityKey: 'y'.repeat(40), logger });
          await other.close();
          expect(warnings.some((m) => m.includes('still holds the authority key'))).toBe(true);
          expect((await store.storedAuthorityKey())?.key).toBe(LEGACY_KEY);

          const gate2 = await createGate({
            policies,
            scope,
            store,
            authorityKey: LEGACY_KEY,
            instanceId: 'pg-2',
          });
          expect(await fingerprint(gate2)).toBe(before);
          await gate2.close();
          const rows = await store.query<{ n: number }>(
            "select count(*)::int as n from settings where name = 'authority_key'",
          );
          expect(rows[0]?.n).toBe(0);
        } finally {
          await store.close();
        }
      });
    });
  }
});
