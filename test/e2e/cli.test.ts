/** The `effectgate` command as users run it (the built bin), on a real embedded store. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { openKyselyStore } from '../../src/store/open-store.js';
import { runCli } from '../helpers/proxy-process.js';
import { newRun, reserve } from '../integration/store/inputs.js';

const dir = mkdtempSync(join(tmpdir(), 'effectgate-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('effectgate policies check', () => {
  it('prints the tools it loaded and exits 0', async () => {
    const r = await runCli(['policies', 'check', 'policies/']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('github.create_issue');
    expect(r.stdout).toMatch(/POST api\.github\.com \/repos\/\{owner\}\/\{repo\}\/issues/);
  });

  it('prints every error as file:line:column: field: message and exits 1', async () => {
    const r = await runCli(['policies', 'check', 'test/fixtures/policies/duplicate-id']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /duplicate-id\/b\.yaml:\d+:\d+: tools\[\d+\]\.id: duplicate tool id "shared\.tool"/,
    );
  });

  it('speaks JSON with --json', async () => {
    const r = await runCli(['policies', 'check', 'policies/', '--json']);
    const out = JSON.parse(r.stdout) as { ok: boolean; tools: { id: string }[] };
    expect(out.ok).toBe(true);
    expect(out.tools.map((t) => t.id)).toContain('github.create_issue');
  });

  it('refuses an unknown command with usage and exit 2', async () => {
    const r = await runCli(['frobnicate']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('usage: effectgate');
  });
});

describe('effectgate migrate and audit verify', () => {
  const store = `pglite:${join(dir, 'store')}`;

  it('migrates a fresh store', async () => {
    const r = await runCli(['migrate', '--store', store]);
    expect(r.code, r.stderr).toBe(0);
  });

  it('exits 0 on an intact chain and 1 naming the first bad event after tampering', async () => {
    const s = await openKyselyStore({ url: store });
    for (let i = 0; i < 3; i++) await s.decide(reserve(newRun(), null));
    await s.close();
    const ok = await runCli(['audit', 'verify', '--store', store]);
    expect(ok.code, ok.stdout + ok.stderr).toBe(0);
    expect(ok.stdout).toContain('audit chain intact');

    const t = await openKyselyStore({ url: store, migrate: false });
    // Only a superuser can do this: the triggers refuse UPDATE on events otherwise.
    await sql.raw('alter table events disable trigger all').execute(t.db);
    await sql.raw(`update events set payload = replace(payload, '"allow"', '"block"')`).execute(t.db);
    await t.close();
    const bad = await runCli(['audit', 'verify', '--store', store]);
    expect(bad.code).toBe(1);
    expect(bad.stdout).toMatch(/BROKEN.*seq \d+/);
    // Two CLI processes and two store opens: about 10 s each on a loaded 2-core machine.
  }, 90_000);
});

describe('--help and --version', () => {
  it.each([
    ['proxy', '--tunnel-idle-timeout'],
    ['policies', 'policies check DIR'],
    ['operations', 'operations resolve <id>'],
    ['approvals', 'approvals grant --run RUN'],
    ['trail', 'trail <operation-id>'],
    ['recover', '--stale-after'],
    ['audit', 'audit prune --before TIME'],
    ['migrate', '--store URL'],
    ['ca', 'ca init --dir DIR'],
    ['demo', '--no-wait'],
  ])(
    'effectgate %s --help (and -h, after a subcommand too) prints its usage with exit 0, never a parse error',
    async (command, text) => {
      for (const args of [
        [command, '--help'],
        [command, '-h'],
        [command, 'list', '--help'],
      ]) {
        const r = await runCli(args);
        expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
        expect(r.stdout).toContain(`usage: effectgate ${command}`);
        expect(r.stdout).toContain(text);
        expect(r.stderr).toBe('');
      }
    },
  );

  it('the proxy help names every one of its flags', async () => {
    const { PROXY_OPTIONS } = await import('../../src/cli/proxy-command.js');
    const r = await runCli(['proxy', '--help']);
    for (const flag of Object.keys(PROXY_OPTIONS)) expect(r.stdout).toContain(`--${flag}`);
  });

  it('an unknown flag gets a did-you-mean and the usage, exit 2, never parseArgs text', async () => {
    for (const [args, near, usage] of [
      [['operations', '--stat', 'unknown'], '--state', 'usage: effectgate operations'],
      [['proxy', '--upstream-cert', 'x.pem'], '--upstream-ca', 'usage: effectgate proxy'],
      [['audit', 'verify', '--fil', 'x'], '--file', 'usage: effectgate audit'],
    ] as const) {
      const r = await runCli([...args]);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toContain(`(did you mean ${near}?)`);
      expect(r.stderr).toContain(usage);
      expect(r.stderr).not.toMatch(/ERR_PARSE_ARGS|Unknown option|To specify/);
      expect(r.stdout).toBe('');
    }
  });

  it('effectgate --version prints the package version', async () => {
    const r = await runCli(['--version']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^effectgate \d+\.\d+\.\d+\n$/);
  });
});
