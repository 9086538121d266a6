/** The proxy's config file: validated once, every problem as file:line:column, paths relative to the file. */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfigFile, PROXY_SETTINGS, parseConfigFile } from '../../../src/config/index.js';
import { EffectgateError } from '../../../src/errors.js';

const FILE = '/etc/effectgate/effectgate.yaml';
const EXAMPLE = new URL('../../../effectgate.example.yaml', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'effectgate-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const values = (text: string): Record<string, unknown> =>
  Object.fromEntries(
    [...parseConfigFile(FILE, text, PROXY_SETTINGS).values].map(([name, v]) => [name, v.value]),
  );

function errorOf(text: string): string {
  try {
    parseConfigFile(FILE, text, PROXY_SETTINGS);
  } catch (err) {
    expect(err).toBeInstanceOf(EffectgateError);
    expect((err as EffectgateError).code).toBe('EG_ERR_CONFIG_INVALID');
    return (err as Error).message;
  }
  throw new Error('expected the config file to be refused');
}

describe('config file', () => {
  it('reads the flag names as keys; numbers and YAML lists where a flag takes text', () => {
    expect(
      values(
        'listen: 0.0.0.0:8080\nmax-connections: 2048\nallow-connect-ports: [8443, 9443]\nno-migrate: true\n',
      ),
    ).toEqual({
      listen: '0.0.0.0:8080',
      'max-connections': '2048',
      'allow-connect-ports': '8443,9443',
      'no-migrate': true,
    });
    expect(values('')).toEqual({});
    expect(values('# only a comment\n')).toEqual({});
  });

  it('resolves relative paths against its own directory, absolute ones and URLs as written', () => {
    expect(
      values(
        'policies: policies\nca-dir: ../ca\nagents: /srv/agents.yaml\nadmin-token-file: ./token\nstore: pglite:./data\n',
      ),
    ).toEqual({
      policies: '/etc/effectgate/policies',
      'ca-dir': '/etc/ca',
      agents: '/srv/agents.yaml',
      'admin-token-file': '/etc/effectgate/token',
      store: 'pglite:/etc/effectgate/data',
    });
    expect(values('store: pglite:memory\n')).toEqual({ store: 'pglite:memory' });
    expect(values('store: postgres://gate@db:5432/eg\n')).toEqual({ store: 'postgres://gate@db:5432/eg' });
  });

  it('refuses an unknown key with file:line:column and the nearest known one', () => {
    expect(errorOf('listen: 127.0.0.1:8080\nheartbaet: 5s\n')).toBe(
      `${FILE}:2:1: heartbaet: unknown setting (did you mean heartbeat?); the keys are the flag names of effectgate proxy --help`,
    );
    expect(errorOf('max_connections: 10\n')).toContain('(did you mean max-connections?)');
    expect(errorOf('frobnicate: 1\n')).toBe(
      `${FILE}:1:1: frobnicate: unknown setting; the keys are the flag names of effectgate proxy --help`,
    );
  });

  it('refuses a wrong type at the line of the value, every problem at once', () => {
    const message = errorOf(
      'listen:\n  - a\nno-migrate: yes\nheartbeat:\nadmin: ""\nmax-connections: { n: 1 }\n',
    );
    expect(message.split('\n')).toEqual([
      `${FILE}:2:3: listen: must be a string or a number, not a list`,
      `${FILE}:3:13: no-migrate: must be true or false, not string "yes"`,
      `${FILE}:4:11: heartbeat: has no value (leave the key out to keep the default)`,
      `${FILE}:5:8: admin: is empty (leave the key out to keep the default)`,
      `${FILE}:6:18: max-connections: must be a string or a number, not a mapping`,
    ]);
  });

  it('refuses inline secrets, a password in the store URL and a nested config, saying what to do instead', () => {
    expect(errorOf('admin-token: abc\n')).toBe(
      `${FILE}:1:1: admin-token: an inline secret is not read from a config file (files get committed and copied into images): set EFFECTGATE_ADMIN_TOKEN, or name a file holding it with admin-token-file`,
    );
    expect(errorOf('authority-key: abc\n')).toContain(
      'set EFFECTGATE_AUTHORITY_KEY, or name a file holding it with authority-key-file',
    );
    const store = errorOf('store: postgres://gate:hunter2@db/eg\n');
    expect(store).toMatch(
      /^\/etc\/effectgate\/effectgate\.yaml:1:8: store: a password in the store URL is not read/,
    );
    expect(store).not.toContain('hunter2');
    expect(errorOf('config: other.yaml\n')).toContain('config: a config file cannot name another one');
  });

  it('refuses what is not a mapping, and YAML it cannot read, located', () => {
    expect(errorOf('- listen\n')).toBe(
      `${FILE}:1:1: (file): expected a mapping of settings (the flag names as keys)`,
    );
    expect(errorOf('listen: a\nlisten: b\n')).toMatch(
      /^\/etc\/effectgate\/effectgate\.yaml:2:1: \(yaml\): invalid YAML/,
    );
  });

  it('names a file it cannot read', async () => {
    await expect(loadConfigFile(join(dir, 'missing.yaml'), PROXY_SETTINGS)).rejects.toThrow(
      `config file ${join(dir, 'missing.yaml')}: ENOENT`,
    );
    const file = join(dir, 'ok.yaml');
    writeFileSync(file, 'policies: p\n');
    expect((await loadConfigFile(file, PROXY_SETTINGS)).values.get('policies')?.value).toBe(join(dir, 'p'));
  });

  it('loads effectgate.example.yaml, the README example', async () => {
    const example = await loadConfigFile(EXAMPLE, PROXY_SETTINGS);
    expect(example.values.get('listen')?.value).toBe('127.0.0.1:8080');
    expect(example.values.get('policies')?.value).toBe(
      new URL('../../../policies', import.meta.url).pathname,
    );
    expect(example.values.size).toBeGreaterThan(8);
  });
});

describe('README "Configuration"', () => {
  it('shows a config file that loads, naming only keys of effectgate.example.yaml', async () => {
    const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
    const section = readme.slice(readme.indexOf('\n## Configuration\n'), readme.indexOf('\n## Commands\n'));
    const block = /```yaml\n([\s\S]*?)```/.exec(section)?.[1];
    expect(block).toBeDefined();
    const shown = parseConfigFile(EXAMPLE, block!, PROXY_SETTINGS).values;
    const example = (await loadConfigFile(EXAMPLE, PROXY_SETTINGS)).values;
    expect(shown.size).toBeGreaterThan(8);
    for (const [name, { value }] of shown) expect(example.get(name)?.value, name).toEqual(value);
  });
});
