/** `--resolve HOST:PORT=ADDRESS:PORT`: parsed once, refused with where it was given, never from the environment. */
import { describe, expect, it } from 'vitest';
import { PROXY_OPTIONS } from '../../../src/cli/proxy-command.js';
import {
  PROXY_SETTINGS,
  type ProxySettingValues,
  parseConfigFile,
  parseResolveEntries,
  resolveSettings,
  settingsUsage,
} from '../../../src/config/index.js';
import { EffectgateError } from '../../../src/errors.js';

const FILE = '/etc/effectgate/effectgate.yaml';

function refusal(where: string, text: string): string {
  try {
    parseResolveEntries(where, text);
  } catch (err) {
    expect(err).toBeInstanceOf(EffectgateError);
    expect((err as EffectgateError).code).toBe('EG_ERR_CONFIG_INVALID');
    return (err as Error).message;
  }
  throw new Error(`expected ${text} to be refused`);
}

describe('--resolve entries', () => {
  it('reads HOST:PORT=ADDRESS:PORT, the host spelled as the proxy sees request hosts', () => {
    expect(
      parseResolveEntries(
        '--resolve',
        'api.stripe.com:443=127.0.0.1:12111, API.GitHub.com.:443=[::1]:8443,[0:0::1]:80=127.0.0.2:80',
      ),
    ).toEqual([
      { host: 'api.stripe.com', port: 443, address: '127.0.0.1', addressPort: 12111 },
      { host: 'api.github.com', port: 443, address: '::1', addressPort: 8443 },
      { host: '::1', port: 80, address: '127.0.0.2', addressPort: 80 },
    ]);
  });

  it.each([
    ['api.stripe.com:443', 'has no ='],
    ['api.stripe.com=127.0.0.1:12111', 'does not start with HOST:PORT'],
    ['api.stripe.com:443=127.0.0.1', 'does not end with ADDRESS:PORT'],
    ['api.stripe.com:443=127.0.0.1:70000', 'does not end with ADDRESS:PORT'],
    ['api.stripe.com:0=127.0.0.1:1', 'does not start with HOST:PORT'],
    ['api.stripe.com:443=localhost:12111', 'sends it to "localhost", which is not an IP address'],
    ['*.stripe.com:443=127.0.0.1:12111', 'names no host'],
    ['[api]:443=127.0.0.1:1', 'does not start with HOST:PORT'],
  ])('refuses %s: %s, naming the setting and the form', (text, why) => {
    const message = refusal('--resolve', text);
    expect(message).toContain(`--resolve: ${JSON.stringify(text)} ${why}`);
    expect(message).toContain('HOST:PORT=ADDRESS:PORT');
  });

  it('refuses one host:port given twice (which was meant cannot be told)', () => {
    expect(refusal('--resolve', 'a.example:443=127.0.0.1:1,A.example:443=127.0.0.1:2')).toContain(
      'gives a.example:443 a second time',
    );
  });
});

describe('the resolve setting', () => {
  const settings = (flags: Record<string, string | readonly string[]>, env = {}, file?: string) =>
    resolveSettings<ProxySettingValues>(PROXY_SETTINGS, {
      flags,
      env,
      file: file === undefined ? null : parseConfigFile(FILE, file, PROXY_SETTINGS),
    });

  it('is a repeatable flag: each --resolve is one more entry', () => {
    expect(PROXY_OPTIONS.resolve).toEqual({ type: 'string', multiple: true });
    const s = settings({ resolve: ['a.example:443=127.0.0.1:1', 'b.example:443=127.0.0.1:2'] });
    expect(parseResolveEntries(s.where('resolve'), s.values.resolve!).map((e) => e.host)).toEqual([
      'a.example',
      'b.example',
    ]);
  });

  it('is never taken from the environment: only given explicitly, by a flag or the config file', () => {
    const s = settings({}, { EFFECTGATE_RESOLVE: 'api.stripe.com:443=127.0.0.1:1' });
    expect(s.values.resolve).toBeUndefined();
    expect(settingsUsage(PROXY_SETTINGS).find((l) => l.includes('--resolve'))).not.toContain(
      'EFFECTGATE_RESOLVE',
    );
  });

  it('reads a config file list, and a bad value is reported at its file:line:column', () => {
    const s = settings(
      {},
      {},
      'listen: 127.0.0.1:8080\nresolve: [api.stripe.com:443=127.0.0.1:1, "x:1=y:2"]\n',
    );
    expect(s.values.resolve).toBe('api.stripe.com:443=127.0.0.1:1,x:1=y:2');
    expect(refusal(s.where('resolve'), s.values.resolve!)).toMatch(
      /^\/etc\/effectgate\/effectgate\.yaml:2:10: resolve: "x:1=y:2" sends it to "y", which is not an IP address/,
    );
  });
});
