/**
 * `effectgate proxy --config FILE` and `--print-config` with the built CLI (`npm run build` first):
 * a flag, an environment variable and a file value each win where they should, secrets never reach
 * the output, a bad value is refused with the message the start gives, and nothing is opened.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/proxy-process.js';

const BIN = fileURLToPath(new URL('../../bin/effectgate.js', import.meta.url));
const REPO_POLICIES = fileURLToPath(new URL('../../policies', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'effectgate-print-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The config file's directory (relative paths in it resolve here) and a different working one. */
const conf = join(dir, 'conf');
const cwd = join(dir, 'elsewhere');
mkdirSync(conf);
mkdirSync(cwd);
cpSync(REPO_POLICIES, join(conf, 'policies'), { recursive: true });
const ADMIN_TOKEN = 'admin-token-d3adb33f-never-printed';
writeFileSync(join(conf, 'admin-token'), `${ADMIN_TOKEN}\n`);

const SECRETS = {
  db: 'db-password-c0ffee-never-printed',
  authority: 'authority-key-0123456789abcdef-never-printed',
  admin: ADMIN_TOKEN,
};

function configFile(name: string, text: string): string {
  const file = join(conf, name);
  writeFileSync(file, text);
  return file;
}

const file = configFile(
  'effectgate.yaml',
  [
    'listen: 127.0.0.1:7001       # the flag wins',
    'heartbeat: 7s                # the environment wins',
    'stale-after: 45s             # only here: the file wins',
    'policies: policies           # relative to this file',
    'admin-token-file: admin-token',
    'store: pglite:./store',
    'allow-connect-ports: [8443]',
    '',
  ].join('\n'),
);

/** Only what each test sets: no DATABASE_URL (or other setting) leaks in from the suite's environment. */
const clean = {
  DATABASE_URL: '',
  EFFECTGATE_CONFIG: '',
  EFFECTGATE_ADMIN_TOKEN: '',
  EFFECTGATE_AUTHORITY_KEY: '',
};

/** A line of the output as a pattern; the `${…}` parts (paths) are matched literally. */
function row(strings: TemplateStringsArray, ...parts: string[]): RegExp {
  const literal = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(
    strings.raw.map((s, i) => s + (i < parts.length ? literal(parts[i]!) : '')).join(''),
    'm',
  );
}

function expectNoSecret(out: { stdout: string; stderr: string }): void {
  for (const secret of Object.values(SECRETS)) {
    expect(out.stdout).not.toContain(secret);
    expect(out.stderr).not.toContain(secret);
  }
}

describe('effectgate proxy --print-config', () => {
  it('prints every setting with its source (flag, env, file:line, default), secrets masked, and opens nothing', async () => {
    const r = await runCli(
      ['proxy', '--config', file, '--listen', '127.0.0.1:7002', '--print-config'],
      {
        ...clean,
        EFFECTGATE_HEARTBEAT: '6s',
        // Unreachable on purpose: a store opened would fail the command.
        DATABASE_URL: `postgres://gate:${SECRETS.db}@127.0.0.1:1/effectgate`,
        EFFECTGATE_AUTHORITY_KEY: SECRETS.authority,
      },
      cwd,
    );
    expect(r.code, r.stderr).toBe(0);
    expectNoSecret(r);
    const out = r.stdout;
    expect(out).toMatch(/^listen +127\.0\.0\.1:7002 +flag --listen$/m);
    expect(out).toMatch(/^heartbeat +6s +env EFFECTGATE_HEARTBEAT$/m);
    expect(out).toMatch(row`^stale-after +45s +${file}:3$`);
    expect(out).toMatch(row`^policies +${join(conf, 'policies')} +${file}:4$`);
    expect(out).toMatch(/^store +postgres:\/\/gate:\*\*\*@127\.0\.0\.1:1\/effectgate +env DATABASE_URL$/m);
    expect(out).toMatch(/^authority-key +\*\*\* +env EFFECTGATE_AUTHORITY_KEY$/m);
    expect(out).toMatch(row`^admin-token-file +${join(conf, 'admin-token')} +${file}:5$`);
    expect(out).toMatch(/^allow-connect-ports +8443 +/m);
    expect(out).toMatch(/^drain-timeout +10s +default$/m);
    expect(out).toMatch(row`^config +${file} +flag --config$`);
    // Nothing was opened nor created: no embedded store here or beside the file.
    expect(existsSync(join(cwd, '.effectgate'))).toBe(false);
    expect(existsSync(join(conf, 'store'))).toBe(false);
  });

  it('finds the file through EFFECTGATE_CONFIG too, with the store beside it', async () => {
    const r = await runCli(['proxy', '--print-config'], { ...clean, EFFECTGATE_CONFIG: file }, cwd);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(row`^config +${file} +env EFFECTGATE_CONFIG$`);
    expect(r.stdout).toMatch(row`^store +pglite:${join(conf, 'store')} +${file}:6$`);
    expect(r.stdout).toMatch(row`^listen +127\.0\.0\.1:7001 +${file}:1$`);
  });

  it('refuses a bad value with the very message the start gives, exit 1', async () => {
    const bad = configFile('bad-duration.yaml', 'policies: policies\ndrain-timeout: soon\n');
    const printed = await runCli(['proxy', '--config', bad, '--print-config'], clean, cwd);
    const started = await runCli(['proxy', '--config', bad], clean, cwd);
    expect(printed.code).toBe(1);
    expect(started.code).toBe(1);
    expect(printed.stdout).toBe('');
    expect(printed.stderr).toBe(
      `effectgate: EG_ERR_CONFIG_INVALID: ${bad}:2:16: drain-timeout must be a duration like 500ms, 5s or 1m, not "soon"\n`,
    );
    expect(started.stderr).toBe(printed.stderr);
    expect(existsSync(join(cwd, '.effectgate'))).toBe(false);
  });

  it('refuses an EFFECTGATE_AUTHORITY_KEY shorter than 32 characters, as it does a short key file, without printing it', async () => {
    const r = await runCli(
      ['proxy', '--print-config'],
      { ...clean, EFFECTGATE_AUTHORITY_KEY: 'short-key-7' },
      cwd,
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('EFFECTGATE_AUTHORITY_KEY: the key must be at least 32 characters');
    expect(r.stderr + r.stdout).not.toContain('short-key-7');
  });

  it('refuses an unknown key at file:line:column with a did-you-mean, and an inline secret', async () => {
    const typo = configFile('typo.yaml', 'policies: policies\nstale-afer: 1m\n');
    const r = await runCli(['proxy', '--config', typo, '--print-config'], clean, cwd);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${typo}:2:1: stale-afer: unknown setting (did you mean stale-after?)`);
    const inline = configFile('inline.yaml', `admin-token: ${SECRETS.admin}\n`);
    const s = await runCli(['proxy', '--config', inline, '--print-config'], clean, cwd);
    expect(s.code).toBe(1);
    expect(s.stderr).toContain(`${inline}:1:1: admin-token: an inline secret is not read from a config file`);
    expectNoSecret(s);
  });
  it('refuses an agents file beside a scope from any source, naming where each came from', async () => {
    const r = await runCli(
      ['proxy', '--agents', 'agents.yaml', '--print-config'],
      { ...clean, EFFECTGATE_TENANT: 'acme' },
      cwd,
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'effectgate: EG_ERR_CONFIG_INVALID: --agents cannot be combined with EFFECTGATE_TENANT: with an agents file every scope comes from the credential.\n',
    );
  });
});

describe('effectgate proxy --config FILE', () => {
  let child: ChildProcess | undefined;
  afterAll(() => {
    child?.kill('SIGKILL');
  });

  it('starts with the file: its listen address and its store, beside the file', async () => {
    const started = configFile(
      'start.yaml',
      'listen: 127.0.0.1:0\npolicies: policies\nstore: pglite:./store\n',
    );
    child = spawn(process.execPath, [BIN, 'proxy', '--config', started], {
      cwd,
      env: { ...process.env, ...clean, EFFECTGATE_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stderr?.on('data', (d: Buffer) => {
      err += d.toString();
    });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no listening line in 60s\n${out}\n${err}`)), 60_000);
      child?.stdout?.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('effectgate proxy listening on http://127.0.0.1:')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child?.once('exit', (code) => reject(new Error(`exited ${code}\n${out}\n${err}`)));
    });
    expect(out).toContain(`store pglite:${join(conf, 'store')}`);
    expect(existsSync(join(conf, 'store'))).toBe(true);
    expect(existsSync(join(cwd, '.effectgate'))).toBe(false);
    child.kill('SIGTERM');
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).toBe(0);
  }, 90_000);
});
