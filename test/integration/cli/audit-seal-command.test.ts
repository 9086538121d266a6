/**
 * The sealed trail from the command line, in process: `keys audit` makes a signer key (0600) and
 * its verifier (FILE.pub, stdout); `audit checkpoint` prints the latest signed checkpoint as a
 * witness keeps it; `audit verify` checks every checkpoint and the kept ones, reports the events
 * not sealed yet, and fails on a rewritten checkpoint or another key. Both stores: an embedded one
 * on disk (whose key lives beside it) and PostgreSQL when DATABASE_URL is set.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { main } from '../../../src/cli/index.js';
import { checkpointNote } from '../../../src/store/checkpoint-note.js';
import {
  AuditSealer,
  chooseAuditKey,
  generateNoteKey,
  type NoteSigner,
  type NoteVerifier,
  parseSignerKey,
  parseVerifierKey,
  readCheckpointNote,
  readVerifierKey,
  type Store,
} from '../../../src/store/index.js';
import { openKyselyStore } from '../../../src/store/open-store.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, outcome, reserve } from '../store/inputs.js';

const dir = mkdtempSync(join(tmpdir(), 'effectgate-audit-seal-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

/** `effectgate <args>` in this process: its exit code and what it wrote. */
async function cli(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stdout += String(chunk);
    return true;
  });
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stderr += String(chunk);
    return true;
  });
  try {
    const code = await main(args);
    return { code, stdout, stderr };
  } finally {
    vi.restoreAllMocks();
  }
}

async function record(store: Store, calls: number): Promise<void> {
  for (let i = 0; i < calls; i++) {
    const key = newKey();
    const a = await store.decide(reserve(newRun(), key));
    expectVerdict(a, 'allow');
    await store.recordOutcome(outcome(a, key, 'succeeded'));
  }
}

describe('effectgate keys audit', () => {
  it('writes a 0600 signer key and its verifier key to FILE.pub and stdout, never over a file', async () => {
    const out = join(dir, 'made.key');
    const r = await cli(['keys', 'audit', '--out', out]);
    expect(r.code, r.stderr).toBe(0);
    expect(statSync(out).mode & 0o777).toBe(0o600);
    const written = readFileSync(out, 'utf8');
    const signer = parseSignerKey(written);
    const pub = readFileSync(`${out}.pub`, 'utf8');
    expect(pub).toBe(`${signer.verifierKey}\n`);
    expect(r.stdout).toBe(pub);
    expect((await readVerifierKey(`${out}.pub`)).verifierKey).toBe(signer.verifierKey);
    expect((await readVerifierKey(out)).verifierKey).toBe(signer.verifierKey);
    expect(r.stderr).toContain('--audit-key-file');

    const again = await cli(['keys', 'audit', '--out', out]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('exists: not replaced');
    expect(readFileSync(out, 'utf8')).toBe(written);
    // FILE.pub in the way: nothing written, FILE included.
    const blocked = join(dir, 'blocked.key');
    writeFileSync(`${blocked}.pub`, 'something\n');
    expect((await cli(['keys', 'audit', '--out', blocked])).code).toBe(1);
    expect(() => statSync(blocked)).toThrow();
  });

  it('refuses --store (exit 2) and a missing --out (exit 1)', async () => {
    const r = await cli(['keys', 'audit', '--out', join(dir, 'x.key'), '--store', 'pglite:memory']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('takes no --store');
    expect((await cli(['keys', 'audit'])).code).toBe(1);
  });
});

interface Sealed {
  readonly url: string;
  readonly signer: NoteSigner;
  /** `--audit-key-file` for this store: none for the embedded one, whose key is found beside it. */
  readonly keyArgs: readonly string[];
  readonly logId: string;
  readonly latestSize: number;
  readonly sealedAt: string;
  /** PostgreSQL: the store stays open (the CLI opens its own connection); dropped at the end. */
  readonly pg: TestStore | null;
}

/** A store with 3 sealed calls and 2 more recorded after the seal. */
async function sealedStore(kind: 'pglite' | 'postgres'): Promise<Sealed> {
  if (kind === 'pglite') {
    const url = `pglite:${join(dir, 'store')}`;
    const store = await openKyselyStore({ url, migrate: true });
    try {
      const { signer } = await chooseAuditKey({ storeUrl: url, create: true });
      return { url, ...(await fill(store, signer!)), keyArgs: [], pg: null };
    } finally {
      await store.close();
    }
  }
  const store = await openTestStore(storeTargets().find((t) => t.kind === 'postgres')!);
  const file = join(dir, 'pg-audit.key');
  expect((await cli(['keys', 'audit', '--out', file])).code).toBe(0);
  const signer = parseSignerKey(readFileSync(file, 'utf8'));
  return {
    url: store.url,
    ...(await fill(store, signer)),
    keyArgs: ['--audit-key-file', `${file}.pub`],
    pg: store,
  };
}

async function fill(
  store: Store,
  signer: NoteSigner,
): Promise<Pick<Sealed, 'signer' | 'logId' | 'latestSize' | 'sealedAt'>> {
  await record(store, 3);
  await new AuditSealer({ store, signer }).seal();
  const latest = (await store.latestCheckpoint())!;
  await record(store, 2);
  return { signer, logId: await store.auditLogId(), latestSize: latest.size, sealedAt: latest.sealedAt };
}

describe.each(storeTargets().map((t) => t.kind))(
  'effectgate audit checkpoint / audit verify (%s)',
  { timeout: 60_000 },
  (kind) => {
    let s: Sealed;
    beforeAll(async () => {
      s = await sealedStore(kind);
    });
    afterAll(async () => {
      await s?.pg?.close();
    });
    const verify = (...args: string[]) => cli(['audit', 'verify', '--store', s.url, ...s.keyArgs, ...args]);

    it('audit checkpoint prints the latest signed checkpoint, as readCheckpointNote reads it', async () => {
      const r = await cli(['audit', 'checkpoint', '--store', s.url]);
      expect(r.code, r.stderr).toBe(0);
      const note = readCheckpointNote(r.stdout, [verifierOf(s.signer)]);
      expect(note.verified).toBe(true);
      expect(note.size).toBe(s.latestSize);
      expect(note.size).toBeGreaterThan(0);
      expect(note.origin).toBe(`effectgate/audit/${s.logId}`);
      writeFileSync(join(dir, `${kind}-kept.note`), r.stdout);
    });

    it('audit verify passes on the intact store, with signatures checked and the unsealed events', async () => {
      const r = await verify('--witness', join(dir, `${kind}-kept.note`));
      expect(r.code, r.stdout + r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^audit chain intact: /);
      expect(r.stdout).toContain(`latest size ${s.latestSize}, sealed at ${s.sealedAt}`);
      expect(r.stdout).toContain(`signatures checked against ${s.signer.name}`);
      expect(r.stdout).toMatch(/\n[1-9]\d* events not sealed yet, oldest \d+s\n/);
      expect(r.stdout).toContain(`: ok (checkpoint of size ${s.latestSize} held)`);
    });

    it('--json has the seal report and the witnesses', async () => {
      const r = await verify('--json', '--witness', join(dir, `${kind}-kept.note`));
      expect(r.code, r.stdout + r.stderr).toBe(0);
      const json = JSON.parse(r.stdout) as Record<string, unknown>;
      expect(json).toMatchObject({
        ok: true,
        chains: 64,
        sealed: { ok: true, signatures: 'checked', latest: { size: s.latestSize }, problems: [] },
        witnessed: [{ ok: true, size: s.latestSize, reason: null }],
      });
      expect((json['sealed'] as { unsealed: { count: number } }).unsealed.count).toBeGreaterThan(0);
    });

    it('fails (exit 1) on a kept checkpoint whose root the store does not hold', async () => {
      const other = 'ab'.repeat(32);
      const file = join(dir, `${kind}-rewritten.note`);
      writeFileSync(file, checkpointNote(s.signer, s.logId, s.latestSize, other, s.sealedAt));
      const r = await verify('--witness', file);
      expect(r.code).toBe(1);
      expect(r.stdout).toContain(`FAILED: the store's checkpoint of size ${s.latestSize} has another root`);
      // The genuine note with its root line changed: its signature no longer holds.
      const kept = readFileSync(join(dir, `${kind}-kept.note`), 'utf8');
      const root = readCheckpointNote(kept, []).rootHex;
      const edited = kept.replace(
        Buffer.from(root, 'hex').toString('base64'),
        Buffer.from(other, 'hex').toString('base64'),
      );
      expect(edited).not.toBe(kept);
      writeFileSync(file, edited);
      const r2 = await verify('--witness', file);
      expect(r2.code).toBe(1);
      expect(r2.stdout).toContain('FAILED: not signed by the audit key');
    });

    it('fails on a kept checkpoint signed by another key, and on a missing file', async () => {
      const stranger = parseSignerKey(generateNoteKey('stranger').signerKey);
      const file = join(dir, `${kind}-stranger.note`);
      const kept = readCheckpointNote(readFileSync(join(dir, `${kind}-kept.note`), 'utf8'), []);
      writeFileSync(file, checkpointNote(stranger, s.logId, kept.size, kept.rootHex, s.sealedAt));
      const r = await verify('--witness', file, '--witness', join(dir, 'nothing-here.note'));
      expect(r.code).toBe(1);
      expect(r.stdout).toContain(`FAILED: not signed by the audit key ${s.signer.name}`);
      expect(r.stdout).toContain('nothing-here.note: FAILED: cannot read it');
    });

    it('audit export, then audit verify --file: roots, signatures and witnesses checked offline', async () => {
      const file = join(dir, `${kind}-sealed.jsonl`);
      const exported = await cli(['audit', 'export', '--store', s.url, '--out', file]);
      expect(exported.code, exported.stderr).toBe(0);
      expect(exported.stdout).toMatch(/audit log exported: \d+ event\(s\) and [1-9]\d* checkpoint\(s\)/);
      const pub = join(dir, `${kind}-export.pub`);
      writeFileSync(pub, `${s.signer.verifierKey}\n`);
      const kept = join(dir, `${kind}-kept.note`);
      const r = await cli(['audit', 'verify', '--file', file, '--audit-key-file', pub, '--witness', kept]);
      expect(r.code, r.stdout + r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^audit chain intact: \d+ event\(s\) on 64 chain\(s\) in /);
      expect(r.stdout).toContain(`latest size ${s.latestSize}, sealed at `);
      expect(r.stdout).toContain(`signatures checked against ${s.signer.name}`);
      expect(r.stdout).toMatch(/\n[1-9]\d* events not sealed yet\n/);
      expect(r.stdout).toContain(`: ok (checkpoint of size ${s.latestSize} held)`);
      const json = await cli(['audit', 'verify', '--file', file, '--witness', kept, '--json']);
      expect(json.code, json.stdout + json.stderr).toBe(0);
      expect(JSON.parse(json.stdout)).toMatchObject({
        ok: true,
        seal: { signatures: 'unchecked', latest: { size: s.latestSize }, problems: [] },
        witnessed: [{ file: kept, ok: true, size: s.latestSize }],
      });
      // Its last checkpoint line dropped: the file alone still reads as a log, the witness refutes it.
      const lines = readFileSync(file, 'utf8').split('\n');
      const last = lines.findLastIndex((l) => l.startsWith('{"checkpoint":'));
      const cut = join(dir, `${kind}-cut.jsonl`);
      writeFileSync(cut, lines.filter((_, i) => i !== last).join('\n'));
      const refuted = await cli([
        'audit',
        'verify',
        '--file',
        cut,
        '--audit-key-file',
        pub,
        '--witness',
        kept,
      ]);
      expect(refuted.code).toBe(1);
      expect(refuted.stdout).toContain(`FAILED: the file's log ends before size ${s.latestSize}`);
    });

    it('--audit-key-file with another key reports every checkpoint not signed by it', async () => {
      const file = join(dir, `${kind}-other.key`);
      expect((await cli(['keys', 'audit', '--out', file])).code).toBe(0);
      const r = await cli(['audit', 'verify', '--store', s.url, '--audit-key-file', file]);
      expect(r.code).toBe(1);
      expect(r.stdout).toMatch(/^audit chain intact: /);
      expect(r.stdout).toMatch(
        new RegExp(`\\ncheckpoint ${s.latestSize}: not signed by the audit key effectgate-audit-`),
      );
    });
  },
);

describe('without a checkpoint', () => {
  it('audit checkpoint exits 1 saying so; audit verify passes, signatures unchecked, every event unsealed', async () => {
    const url = `pglite:${join(dir, 'unsealed')}`;
    const store = await openKyselyStore({ url, migrate: true });
    try {
      await record(store, 1);
    } finally {
      await store.close();
    }
    const r = await cli(['audit', 'checkpoint', '--store', url]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('the audit log has no checkpoint yet');
    const v = await cli(['audit', 'verify', '--store', url]);
    expect(v.code, v.stdout + v.stderr).toBe(0);
    expect(v.stdout).toContain('audit log sealed: no checkpoint yet');
    expect(v.stdout).toContain('signatures unchecked (no audit key: give --audit-key-file)');
    expect(v.stdout).toMatch(/\n[1-9]\d* events not sealed yet, oldest \d+s\n/);
  });

  it('refuses the seal flags elsewhere (exit 2)', async () => {
    expect((await cli(['audit', 'export', '--witness', 'x'])).code).toBe(2);
    expect((await cli(['audit', 'checkpoint', '--witness', 'x'])).code).toBe(2);
    expect((await cli(['audit', 'checkpoint', '--json'])).code).toBe(2);
  });
});

function verifierOf(signer: NoteSigner): NoteVerifier {
  return parseVerifierKey(signer.verifierKey);
}
