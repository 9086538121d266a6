/**
 * A gate seals its store's trail (src/engine/gate-sealer.ts): on an embedded store it opened, with
 * a key file it makes beside the store once and keeps; on a store passed in or on PostgreSQL,
 * only with a key it is given, else it says so at start. A gate that stops cleanly leaves nothing
 * unsealed. Real stores, a real loopback destination, undici.
 */
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import {
  generateNoteKey,
  parseVerifierKey,
  readVerifierKey,
  uuidv7,
  verifySealedLog,
} from '../../../src/store/index.js';
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

interface Logged {
  readonly level: string;
  readonly message: string;
}

function recordingLogger(lines: Logged[]): Parameters<typeof createGate>[0]['logger'] {
  return {
    info: (_f, message) => lines.push({ level: 'info', message }),
    warn: (_f, message) => lines.push({ level: 'warn', message }),
    error: (_f, message) => lines.push({ level: 'error', message }),
  };
}

describe('a gate seals its trail', { timeout: 120_000 }, () => {
  let upstream: Upstream;
  const agent = new Agent();
  let root: string;
  let saved: string | undefined;

  beforeAll(async () => {
    upstream = await startUpstream(reply(201, { ok: true }));
  });
  afterAll(async () => {
    await agent.close();
    await upstream?.close();
  });
  beforeEach(() => {
    saved = process.env['EFFECTGATE_AUDIT_KEY_FILE'];
    delete process.env['EFFECTGATE_AUDIT_KEY_FILE'];
    root = mkdtempSync(join(tmpdir(), 'effectgate-sealer-'));
  });
  afterEach(() => {
    if (saved !== undefined) process.env['EFFECTGATE_AUDIT_KEY_FILE'] = saved;
    rmSync(root, { recursive: true, force: true });
  });

  async function call(gate: Gate): Promise<void> {
    const r = await request(`${upstream.url}/effects`, {
      dispatcher: agent.compose(gateInterceptor(gate, { run: `run-${uuidv7()}` })),
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ order: `order-${uuidv7()}` }),
    });
    expect(r.statusCode).toBe(201);
    await r.body.dump();
  }

  it('on an embedded store it opened: a key made beside it once, and nothing left unsealed at a clean stop', async () => {
    const url = `pglite:${join(root, 'store')}`;
    const keyFile = join(root, 'store.keys', 'audit.key');
    const lines: Logged[] = [];
    const gate = await createGate({ policies, store: url, scope, logger: recordingLogger(lines) });
    await call(gate);
    await call(gate);
    await gate.close();
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(lines).toContainEqual({ level: 'info', message: expect.stringContaining('audit key made') });

    // A second life seals with the same key: every checkpoint checks against it.
    const again = await createGate({ policies, store: url, scope, logger: recordingLogger(lines) });
    await call(again);
    await again.close();
    const store = await openKyselyStore({ url, migrate: false });
    try {
      const report = await verifySealedLog(store, await readVerifierKey(keyFile));
      expect(report).toMatchObject({ ok: true, signatures: 'checked', unsealed: { count: 0 } });
      expect(report.latest!.size).toBeGreaterThanOrEqual(6);
    } finally {
      await store.close();
    }
  });

  for (const target of storeTargets()) {
    it(`on a store passed in (${target.name}): seals with the key file it is given, and says so when it has none`, async () => {
      const store = await openTestStore(target);
      try {
        const lines: Logged[] = [];
        const unsealed = await createGate({ policies, store, scope, logger: recordingLogger(lines) });
        await call(unsealed);
        await unsealed.close();
        expect(lines).toContainEqual({ level: 'warn', message: expect.stringContaining('no audit key') });
        expect(await store.latestCheckpoint()).toBeNull();

        const key = generateNoteKey('effectgate-audit-given');
        const file = join(root, 'audit.key');
        writeFileSync(file, `${key.signerKey}\n`, { mode: 0o600 });
        process.env['EFFECTGATE_AUDIT_KEY_FILE'] = file;
        const sealed = await createGate({ policies, store, scope, sealIntervalMs: 20 });
        await call(sealed);
        // Sealed while running, not only at the stop (bounded wait: 10 s at most).
        for (
          let i = 0;
          i < 200 && (await store.unsealedEvents(await store.latestCheckpoint())).count > 0;
          i++
        ) {
          await new Promise((r) => setTimeout(r, 50));
        }
        const running = await verifySealedLog(store, parseVerifierKey(key.verifierKey));
        expect(running).toMatchObject({ ok: true, unsealed: { count: 0 } });
        await sealed.close();
      } finally {
        await store.close();
      }
    });
  }
});
