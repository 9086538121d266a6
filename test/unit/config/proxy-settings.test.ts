/** The proxy's settings table, its one precedence and --print-config's masking (no sockets, no files). */
import { describe, expect, it } from 'vitest';
import { PROXY_OPTIONS } from '../../../src/cli/proxy-command.js';
import {
  envName,
  formatSettings,
  maskUrl,
  PROXY_SETTINGS,
  type ProxySettingValues,
  parseConfigFile,
  resolveSettings,
  type SettingInputs,
} from '../../../src/config/index.js';
import { ANALYSIS_DEFAULTS } from '../../../src/engine/proposal-pool.js';
import { RUN_DEFAULTS } from '../../../src/engine/run-identity.js';
import { EffectgateError } from '../../../src/errors.js';
import { parseDuration } from '../../../src/policy/index.js';
import { DEFAULT_PROXY_LIMITS } from '../../../src/proxy/index.js';
import { DEFAULT_STORE_URL } from '../../../src/store/index.js';

const FILE = '/etc/effectgate/effectgate.yaml';

function resolve(inputs: Partial<Omit<SettingInputs, 'file'>> & { file?: string }) {
  return resolveSettings<ProxySettingValues>(PROXY_SETTINGS, {
    flags: inputs.flags ?? {},
    env: inputs.env ?? {},
    file: inputs.file === undefined ? null : parseConfigFile(FILE, inputs.file, PROXY_SETTINGS),
  });
}

function refusal(run: () => unknown): string {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(EffectgateError);
    expect((err as EffectgateError).code).toBe('EG_ERR_CONFIG_INVALID');
    return (err as Error).message;
  }
  throw new Error('expected a refusal');
}

describe('precedence: flag > environment > config file > default', () => {
  const file = 'heartbeat: 7s\nstale-after: 40s\ndrain-timeout: 20s\n';
  const env = { EFFECTGATE_HEARTBEAT: '6s', EFFECTGATE_STALE_AFTER: '35s' };
  const flags = { heartbeat: '2s' };

  it('takes each setting from the highest source that gives it, and says which', () => {
    const r = resolve({ flags, env, file });
    expect(r.values.heartbeat).toBe('2s');
    expect(r.source('heartbeat')).toEqual({ kind: 'flag' });
    expect(r.values['stale-after']).toBe('35s');
    expect(r.source('stale-after')).toEqual({ kind: 'env', name: 'EFFECTGATE_STALE_AFTER' });
    expect(r.values['drain-timeout']).toBe('20s');
    expect(r.source('drain-timeout')).toEqual({ kind: 'file', file: FILE, line: 3, column: 16 });
    expect(r.values['run-idle']).toBe('15m');
    expect(r.source('run-idle')).toEqual({ kind: 'default' });
    expect(r.isSet('run-idle')).toBe(false);
    expect(r.isSet('drain-timeout')).toBe(true);
  });

  it('names each setting in messages as it was given', () => {
    const r = resolve({ flags, env, file });
    expect(r.where('heartbeat')).toBe('--heartbeat');
    expect(r.where('stale-after')).toBe('EFFECTGATE_STALE_AFTER');
    expect(r.where('drain-timeout')).toBe(`${FILE}:3:16: drain-timeout`);
  });

  it('keeps the existing environment names: DATABASE_URL for --store, EFFECTGATE_TENANT for --tenant', () => {
    const r = resolve({
      env: { DATABASE_URL: 'postgres://db/eg', EFFECTGATE_TENANT: 'acme', EFFECTGATE_STORE: 'pglite:x' },
      file: 'tenant: other\n',
    });
    expect(r.values.store).toBe('postgres://db/eg');
    expect(r.values.tenant).toBe('acme');
    expect(r.values.agent).toBe('agent');
  });

  it('counts an empty environment variable as unset (compose files write an unset variable as empty)', () => {
    const r = resolve({ env: { EFFECTGATE_HEARTBEAT: '', EFFECTGATE_ADMIN_TOKEN: '' }, file });
    expect(r.values.heartbeat).toBe('7s');
    expect(r.values['admin-token']).toBeUndefined();
  });

  it('reads booleans from the environment as true/false or 1/0, and refuses anything else naming the variable', () => {
    expect(resolve({ env: { EFFECTGATE_NO_MIGRATE: '1' } }).values['no-migrate']).toBe(true);
    expect(
      resolve({ env: { EFFECTGATE_NO_MIGRATE: 'false' }, file: 'no-migrate: true\n' }).values['no-migrate'],
    ).toBe(false);
    expect(resolve({ file: 'no-migrate: true\n' }).values['no-migrate']).toBe(true);
    expect(resolve({}).values['no-migrate']).toBe(false);
    expect(refusal(() => resolve({ env: { EFFECTGATE_NO_MIGRATE: 'maybe' } }))).toBe(
      'EFFECTGATE_NO_MIGRATE must be true or false (or 1 / 0); got "maybe"',
    );
  });

  it('never takes an inline secret from a flag, only from the environment', () => {
    const r = resolve({ flags: { 'admin-token': 'from-a-flag' } });
    expect(r.values['admin-token']).toBeUndefined();
    expect(Object.keys(PROXY_OPTIONS)).not.toContain('admin-token');
    expect(Object.keys(PROXY_OPTIONS)).not.toContain('authority-key');
  });

  it('of a secret given inline and as a file, uses the one from the higher source', () => {
    const flagFile = resolve({
      flags: { 'admin-token-file': 'token' },
      env: { EFFECTGATE_ADMIN_TOKEN: 'inline' },
    });
    expect(flagFile.values['admin-token-file']).toBe('token');
    expect(flagFile.values['admin-token']).toBeUndefined();
    const envInline = resolve({
      env: { EFFECTGATE_AUTHORITY_KEY: 'k'.repeat(32) },
      file: 'authority-key-file: key\n',
    });
    expect(envInline.values['authority-key']).toBe('k'.repeat(32));
    expect(envInline.values['authority-key-file']).toBeUndefined();
    expect(formatSettings(envInline)).toMatch(
      /^authority-key-file +\(not used: authority-key wins\) +\/etc/m,
    );
  });

  it('refuses a secret given both ways by one source: which was meant cannot be told', () => {
    expect(
      refusal(() =>
        resolve({ env: { EFFECTGATE_ADMIN_TOKEN_FILE: '/run/token', EFFECTGATE_ADMIN_TOKEN: 'inline' } }),
      ),
    ).toBe(
      'EFFECTGATE_ADMIN_TOKEN_FILE and EFFECTGATE_ADMIN_TOKEN both give admin-token: set only one of them',
    );
  });
});

describe('the table', () => {
  const settings = Object.keys(PROXY_SETTINGS) as (keyof typeof PROXY_SETTINGS)[];

  it('gives every proxy flag (but the --print-config action) an environment name, and --print-config a line', () => {
    const printed = formatSettings(resolve({})).split('\n');
    const flags = Object.keys(PROXY_OPTIONS).filter((f) => f !== 'print-config');
    expect(flags.length).toBeGreaterThan(25);
    for (const flag of flags) {
      const spec = PROXY_SETTINGS[flag as keyof typeof PROXY_SETTINGS];
      expect(spec, flag).toBeDefined();
      const env = envName(flag, spec);
      expect(env, flag).toBe(
        flag === 'store' ? 'DATABASE_URL' : `EFFECTGATE_${flag.replaceAll('-', '_').toUpperCase()}`,
      );
      expect(
        printed.some((l) => l.startsWith(`${flag} `)),
        flag,
      ).toBe(true);
    }
    // Every setting, flag or not, is printed: the environment-only secrets too.
    for (const name of settings)
      expect(
        printed.some((l) => l.startsWith(`${name} `)),
        name,
      ).toBe(true);
  });

  it('shows the defaults the code applies (the values live with that code)', () => {
    const text = (name: keyof typeof PROXY_SETTINGS): string => {
      const spec: { default?: unknown; otherwise?: string } = PROXY_SETTINGS[name];
      return String(spec.default ?? spec.otherwise);
    };
    expect(text('store')).toBe(DEFAULT_STORE_URL);
    expect(Number(text('max-connections'))).toBe(DEFAULT_PROXY_LIMITS.maxConnections);
    expect(Number(text('max-connections-per-client'))).toBe(DEFAULT_PROXY_LIMITS.maxConnectionsPerClient);
    expect(parseDuration(text('keep-alive-timeout'))).toBe(DEFAULT_PROXY_LIMITS.keepAliveTimeoutMs);
    expect(parseDuration(text('tunnel-peek-timeout'))).toBe(DEFAULT_PROXY_LIMITS.tunnelPeekTimeoutMs);
    expect(parseDuration(text('tunnel-idle-timeout'))).toBe(DEFAULT_PROXY_LIMITS.tunnelIdleTimeoutMs);
    expect(parseDuration(text('run-idle'))).toBe(RUN_DEFAULTS.idleMs);
    expect(Number(text('analysis-threads'))).toBe(ANALYSIS_DEFAULTS.threads);
  });
});

describe('masking', () => {
  it('keeps a URL but its password', () => {
    expect(maskUrl('postgres://gate:s3cret@db:5432/effectgate')).toBe(
      'postgres://gate:***@db:5432/effectgate',
    );
    expect(maskUrl('postgresql://gate:p@ss/w0rd@db/eg?sslmode=require')).toBe(
      'postgresql://gate:***@db/eg?sslmode=require',
    );
    expect(maskUrl('postgres://db/eg?user=gate&password=s3cret&x=1')).toBe(
      'postgres://db/eg?user=gate&password=***&x=1',
    );
    expect(maskUrl('postgres://gate@db:5432/eg')).toBe('postgres://gate@db:5432/eg');
    expect(maskUrl('postgres://db:5432/eg')).toBe('postgres://db:5432/eg');
    expect(maskUrl('pglite:./.effectgate')).toBe('pglite:./.effectgate');
  });

  it('prints no secret: inline ones as ***, the store URL without its password', () => {
    const secrets = ['s3cret-db-password', 'admin-token-value-1', 'authority-key-value-that-is-long-enough'];
    const r = resolve({
      env: {
        DATABASE_URL: `postgres://gate:${secrets[0]}@db:5432/eg`,
        EFFECTGATE_ADMIN_TOKEN: secrets[1],
        EFFECTGATE_AUTHORITY_KEY: secrets[2],
      },
    });
    const out = formatSettings(r);
    for (const secret of secrets) expect(out).not.toContain(secret);
    expect(out).toMatch(/^store +postgres:\/\/gate:\*\*\*@db:5432\/eg +env DATABASE_URL$/m);
    expect(out).toMatch(/^admin-token +\*\*\* +env EFFECTGATE_ADMIN_TOKEN$/m);
    expect(out).toMatch(/^authority-key +\*\*\* +env EFFECTGATE_AUTHORITY_KEY$/m);
  });

  it('prints each source: flag, env NAME, file:line, default', () => {
    const out = formatSettings(
      resolve({
        flags: { listen: '127.0.0.1:1' },
        env: { EFFECTGATE_ADMIN: '127.0.0.1:2' },
        file: '\nheartbeat: 9s\n',
      }),
    );
    expect(out).toMatch(/^listen +127\.0\.0\.1:1 +flag --listen$/m);
    expect(out).toMatch(/^admin +127\.0\.0\.1:2 +env EFFECTGATE_ADMIN$/m);
    expect(out).toMatch(/^heartbeat +9s +\/etc\/effectgate\/effectgate\.yaml:2$/m);
    expect(out).toMatch(/^stale-after +30s +default$/m);
    expect(out).toMatch(/^max-connections +\(1024\) +default$/m);
  });
});
