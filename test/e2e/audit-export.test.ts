/** `effectgate audit export` and `audit verify --file`, as users run them (the built bin). */
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openKyselyStore } from '../../src/store/open-store.js';
import { runCli, startProxyProcess } from '../helpers/proxy-process.js';
import { expectVerdict, newKey, newRun, outcome, reserve } from '../integration/store/inputs.js';

const dir = mkdtempSync(join(tmpdir(), 'effectgate-audit-export-e2e-'));
const store = `pglite:${join(dir, 'store')}`;
const exportDir = join(dir, 'exports');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The lines of an export, the header's `exported_at` left out (it differs between two exports). */
function comparable(text: string): string[] {
  const [header, ...events] = text.trimEnd().split('\n');
  const { exported_at: _at, ...rest } = JSON.parse(header!) as Record<string, unknown>;
  return [JSON.stringify(rest), ...events];
}

/** `audit prune` of everything sealed until now into `archive`. */
function pruneNow(archive: string, ...extra: string[]): ReturnType<typeof runCli> {
  return runCli([
    'audit',
    'prune',
    '--store',
    store,
    '--before',
    new Date().toISOString(),
    '--archive',
    archive,
    ...extra,
  ]);
}

beforeAll(async () => {
  const migrated = await runCli(['migrate', '--store', store]);
  expect(migrated.code, migrated.stderr).toBe(0);
  const s = await openKyselyStore({ url: store, migrate: false });
  try {
    for (let i = 0; i < 4; i++) {
      const key = newKey();
      const a = await s.decide(reserve(newRun(), key));
      expectVerdict(a, 'allow');
      await s.recordOutcome(outcome(a, key, 'succeeded'));
    }
  } finally {
    await s.close();
  }
  mkdirSync(exportDir);
});

describe('effectgate audit export / audit verify --file', () => {
  const file = join(exportDir, 'audit.jsonl');

  it('exports to stdout: the header, then one line per event', async () => {
    const r = await runCli(['audit', 'export', '--store', store]);
    expect(r.code, r.stderr).toBe(0);
    const [header, ...events] = r.stdout.trimEnd().split('\n');
    // No gate has sealed this store yet: no tree, every event after the header, by chain.
    expect(JSON.parse(header!)).toMatchObject({
      format: 'effectgate-audit',
      version: 3,
      chains: 64,
      tree: null,
    });
    expect(events.length).toBeGreaterThanOrEqual(8);
    for (const line of events) expect(JSON.parse(line)).toHaveProperty('hash');
  });

  it('exports to --out FILE, mode 0600, the same content as on stdout', async () => {
    const r = await runCli(['audit', 'export', '--store', store, '--out', file]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/audit log exported: \d+ event\(s\) and 0 checkpoint\(s\)/);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const stdout = await runCli(['audit', 'export', '--store', store]);
    expect(comparable(readFileSync(file, 'utf8'))).toEqual(comparable(stdout.stdout));
  });

  it('verifies the file offline: exit 0, and --json', async () => {
    const ok = await runCli(['audit', 'verify', '--file', file]);
    expect(ok.code, ok.stdout + ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/^audit chain intact: \d+ event\(s\) on 64 chain\(s\) in .*audit\.jsonl/);
    const json = await runCli(['audit', 'verify', '--file', file, '--json']);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ file, ok: true, chains: 64, broken: [] });
  });

  it('refuses to overwrite an existing file without --force, and replaces it (mode 0600) with it', async () => {
    const before = readFileSync(file, 'utf8');
    const refused = await runCli(['audit', 'export', '--store', store, '--out', file]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('already exists');
    expect(readFileSync(file, 'utf8')).toBe(before);

    chmodSync(file, 0o644);
    const forced = await runCli(['audit', 'export', '--store', store, '--out', file, '--force']);
    expect(forced.code, forced.stderr).toBe(0);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(comparable(readFileSync(file, 'utf8'))).toEqual(comparable(before));
    expect(readdirSync(exportDir)).toEqual(['audit.jsonl']);
  });

  it('exits 1 naming the event after one byte of a payload was edited', async () => {
    const edited = join(exportDir, 'edited.jsonl');
    const text = readFileSync(file, 'utf8');
    // The decision inside the payload (an escaped JSON string in the line): `\"verdict\" : \"allow\"`.
    const match = /\\"verdict\\" ?: ?\\"(a)llow/.exec(text);
    expect(match).not.toBeNull();
    const at = match!.index;
    const byte = at + match![0].length - 'allow'.length;
    expect(text[byte]).toBe('a');
    writeFileSync(edited, `${text.slice(0, byte)}A${text.slice(byte + 1)}`);
    const line = text.slice(text.lastIndexOf('\n', at) + 1, text.indexOf('\n', at));
    const { chain, seq } = JSON.parse(line) as { chain: number; seq: number };

    const bad = await runCli(['audit', 'verify', '--file', edited]);
    expect(bad.code).toBe(1);
    expect(bad.stdout.split('\n')[0]).toBe(
      `audit chain BROKEN at chain ${chain} event seq ${seq}: hash does not match the event content (event edited)`,
    );
    // No gate had sealed the store when it was exported: the file says so, its events unsealed.
    expect(bad.stdout).toContain('audit log sealed: no checkpoint yet');
    const json = await runCli(['audit', 'verify', '--file', edited, '--json']);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ ok: false, firstBad: { chain, seq } });
  });

  it('exits 1 with FILE:LINE: message on a line that is not an export line', async () => {
    const broken = join(exportDir, 'broken.jsonl');
    const lines = readFileSync(file, 'utf8').split('\n');
    lines[2] = '{"chain": 3,';
    writeFileSync(broken, lines.join('\n'));
    const r = await runCli(['audit', 'verify', '--file', broken]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`^${broken.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:3: not JSON`));
    const missing = await runCli(['audit', 'verify', '--file', join(exportDir, 'nope.jsonl')]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('cannot read');
  });

  it('rejects --file with --store, --force without --out, and --file on export (exit 2)', async () => {
    for (const args of [
      ['audit', 'verify', '--file', file, '--store', store],
      ['audit', 'export', '--store', store, '--force'],
      ['audit', 'export', '--file', file],
      ['audit', 'verify', '--store', store, '--out', file],
    ]) {
      const r = await runCli(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toContain('usage: effectgate audit');
    }
    expect(existsSync(join(exportDir, 'nope.jsonl'))).toBe(false);
  });

  it('exports while a gate runs on the same embedded store (through its store socket)', async () => {
    const gate = await startProxyProcess(['--policies', 'policies/', '--store', store, '--tenant', 'acme']);
    try {
      const live = join(exportDir, 'live.jsonl');
      const r = await runCli(['audit', 'export', '--store', store, '--out', live]);
      expect(r.code, r.stderr).toBe(0);
      const ok = await runCli(['audit', 'verify', '--file', live]);
      expect(ok.code, ok.stdout + ok.stderr).toBe(0);
      // Every event exported before, exactly (the gate may have appended more since).
      const before = comparable(readFileSync(file, 'utf8')).slice(1);
      expect(comparable(readFileSync(live, 'utf8')).slice(1)).toEqual(expect.arrayContaining(before));
      // Pruning needs the store itself: refused, saying why, nothing written.
      const held = join(exportDir, 'held.jsonl');
      const prune = await pruneNow(held);
      expect(prune.code).toBe(1);
      expect(prune.stderr).toContain('cannot run while a gate holds this embedded store');
      expect(existsSync(held)).toBe(false);
    } finally {
      await gate.stop();
    }
  });

  it('audit prune: archives the events before TIME (verified), removes them, and the store still verifies; bad flags exit 2', async () => {
    const archive = join(exportDir, 'pruned.jsonl');
    for (const args of [
      ['audit', 'prune', '--store', store, '--archive', archive],
      ['audit', 'prune', '--store', store, '--before', 'yesterday', '--archive', archive],
      ['audit', 'prune', '--store', store, '--before', '2026-02-30T00:00:00Z', '--archive', archive],
      ['audit', 'prune', '--store', store, '--before', '2026-11-01T00:00:00', '--archive', archive],
      ['audit', 'prune', '--store', store, '--before', '2026-01-01T00:00:00Z'],
      ['audit', 'export', '--store', store, '--before', '2026-01-01T00:00:00Z'],
    ]) {
      const r = await runCli(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toContain('usage: effectgate audit');
    }
    const r = await pruneNow(archive, '--json');
    expect(r.code, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout) as { archived: number; removed: number };
    expect(result.archived).toBeGreaterThanOrEqual(8);
    expect(result.removed).toBe(result.archived);
    expect(statSync(archive).mode & 0o777).toBe(0o600);
    const archived = await runCli(['audit', 'verify', '--file', archive]);
    expect(archived.code, archived.stdout + archived.stderr).toBe(0);
    const live = await runCli(['audit', 'verify', '--store', store]);
    expect(live.code, live.stdout + live.stderr).toBe(0);
    // Again: the log is cut at the last checkpoint already, so nothing is removed and the archive
    // is left as it is (never written over: an archive that exists is refused before anything goes).
    const before = readFileSync(archive, 'utf8');
    const again = await pruneNow(archive);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain('audit log not pruned');
    expect(readFileSync(archive, 'utf8')).toBe(before);
  });
});
