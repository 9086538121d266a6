import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseAgentsFile } from '../../../src/config/index.js';
import { PROXY_AUTHENTICATE, ProxyAuthenticator } from '../../../src/proxy/index.js';
import { FakeGate } from '../../integration/proxy/fake-gate.js';

const sha = (s: string): string => createHash('sha256').update(s, 'utf8').digest('hex');
const SECRET = 'pa:ss wörd';
const agents = parseAgentsFile(
  'agents.yaml',
  `agents:\n  - { id: bot, secret_sha256: ${sha(SECRET)}, tenant: t, area: a, agent: g }\n`,
);
const auth = new ProxyAuthenticator(agents, new FakeGate());
const basic = (s: string): string => `Basic ${Buffer.from(s, 'utf8').toString('base64')}`;

describe('ProxyAuthenticator', () => {
  it('accepts Basic id:secret (secret may hold colons and UTF-8) and Bearer, any scheme case', () => {
    for (const value of [
      basic(`bot:${SECRET}`),
      `basic ${basic(`bot:${SECRET}`).slice(6)}`,
      `Bearer ${SECRET}`,
      `BEARER  ${SECRET}`,
    ]) {
      const r = auth.authenticate({ 'proxy-authorization': value });
      expect(r.ok && r.scope).toEqual({ tenant: 't', area: 'a', agent: 'g' });
    }
  });

  it('answers 407 with the challenge otherwise', () => {
    for (const value of [
      undefined,
      '',
      'Basic',
      basic('bot:nope'),
      basic(`other:${SECRET}`),
      basic(SECRET),
      `Bearer bot`,
      sha(SECRET),
    ]) {
      const r = auth.authenticate(value === undefined ? {} : { 'proxy-authorization': value });
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r.response.status).toBe(407);
        expect(r.response.headers['proxy-authenticate']).toBe(PROXY_AUTHENTICATE);
      }
    }
  });

  it('the file stores no secret: its hash is not a credential', () => {
    expect(auth.authenticate({ 'proxy-authorization': `Bearer ${sha(SECRET)}` }).ok).toBe(false);
    expect(auth.authenticate({ 'proxy-authorization': basic(`bot:${sha(SECRET)}`) }).ok).toBe(false);
  });
});
