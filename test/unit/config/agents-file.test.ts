import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { loadAgentsFile, parseAgentsFile } from '../../../src/config/index.js';
import { EffectgateError } from '../../../src/errors.js';

const FIXTURE = new URL('../../fixtures/agents/agents.yaml', import.meta.url).pathname;
const sha = (s: string): string => createHash('sha256').update(s).digest('hex');
const HASH = sha('secret-a');

function entry(fields: Record<string, string>): string {
  return Object.entries(fields)
    .map(([k, v], i) => `${i === 0 ? '  - ' : '    '}${k}: ${v}`)
    .join('\n');
}

const GOOD = { id: 'triage-bot', secret_sha256: HASH, tenant: 'acme', area: 'support', agent: 'triage-bot' };

function errorOf(text: string): string {
  try {
    parseAgentsFile('agents.yaml', text);
  } catch (err) {
    expect(err).toBeInstanceOf(EffectgateError);
    expect((err as EffectgateError).code).toBe('EG_ERR_CONFIG_INVALID');
    return (err as Error).message;
  }
  throw new Error('expected the agents file to be refused');
}

describe('agents file', () => {
  it('loads the fixture: lookup by id and by secret digest, frozen', async () => {
    const agents = await loadAgentsFile(FIXTURE);
    expect(agents.size).toBe(2);
    const triage = agents.byId('triage-bot');
    expect(triage?.scope).toEqual({ tenant: 'acme', area: 'support', agent: 'triage-bot' });
    expect(triage?.secretSha256.toString('hex')).toBe(sha('triage-secret-1'));
    const byDigest = agents.bySecretSha256(createHash('sha256').update('billing-secret-2').digest());
    expect(byDigest?.id).toBe('billing-bot');
    expect(byDigest?.scope.tenant).toBe('globex');
    expect(agents.byId('nobody')).toBeUndefined();
    expect(agents.bySecretSha256(Buffer.alloc(32))).toBeUndefined();
    expect(Object.isFrozen(agents)).toBe(true);
    expect(Object.isFrozen(triage)).toBe(true);
    expect(Object.isFrozen(triage?.scope)).toBe(true);
  });

  it('accepts upper-case hex', () => {
    const agents = parseAgentsFile(
      'a.yaml',
      `agents:\n${entry({ ...GOOD, secret_sha256: HASH.toUpperCase() })}\n`,
    );
    expect(agents.byId('triage-bot')?.secretSha256.toString('hex')).toBe(HASH);
  });

  it('refuses an unknown field with its line', () => {
    const msg = errorOf(`agents:\n${entry({ ...GOOD, secret: 'plain' })}\n`);
    expect(msg).toMatch(/^agents\.yaml:7:5: agents\[0\]\.secret: unknown field/);
  });

  it('refuses a secret_sha256 that is not 64 hex digits', () => {
    const msg = errorOf(`agents:\n${entry({ ...GOOD, secret_sha256: 'not-a-hash' })}\n`);
    expect(msg).toMatch(/^agents\.yaml:3:20: agents\[0\]\.secret_sha256: must be the SHA-256/);
    expect(errorOf(`agents:\n${entry({ ...GOOD, secret_sha256: HASH.slice(1) })}\n`)).toMatch(
      /secret_sha256/,
    );
  });

  it('refuses a duplicate id, on the second entry', () => {
    const second = { ...GOOD, secret_sha256: sha('secret-b') };
    const msg = errorOf(`agents:\n${entry(GOOD)}\n${entry(second)}\n`);
    expect(msg).toMatch(/^agents\.yaml:7:9: agents\[1\]\.id: duplicate id "triage-bot"/);
  });

  it('refuses two agents sharing a secret (Bearer could not tell them apart)', () => {
    const msg = errorOf(`agents:\n${entry(GOOD)}\n${entry({ ...GOOD, id: 'other' })}\n`);
    expect(msg).toMatch(/agents\[1\]\.secret_sha256: same secret as "triage-bot"/);
  });

  it('refuses a missing field, naming every one', () => {
    const { area: _a, agent: _g, ...partial } = GOOD;
    const msg = errorOf(`agents:\n${entry(partial)}\n`);
    expect(msg).toContain('agents.yaml:2:5: agents[0].area: is required');
    expect(msg).toContain('agents.yaml:2:5: agents[0].agent: is required');
  });

  it('validates scope parts with checkScopePart', () => {
    const msg = errorOf(`agents:\n${entry({ ...GOOD, tenant: '"bad tenant"' })}\n`);
    expect(msg).toMatch(/^agents\.yaml:4:13: agents\[0\]\.tenant: tenant must be 1–128 characters/);
  });

  it('reports every problem, each with its own line', () => {
    const msg = errorOf(
      `agents:\n${entry({ ...GOOD, secret_sha256: 'xyz' })}\n${entry({ ...GOOD, id: 'b', tenant: '-x' })}\n`,
    );
    expect(msg.split('\n')).toHaveLength(2);
    expect(msg).toMatch(/:3:20: agents\[0\]\.secret_sha256/);
    expect(msg).toMatch(/:9:13: agents\[1\]\.tenant/);
  });

  it('refuses a file without an agents list, an empty list and unknown top-level fields', () => {
    expect(errorOf('')).toMatch(/expected a mapping with an `agents` list/);
    expect(errorOf('agents: {}\n')).toMatch(/agents: must be a list/);
    expect(errorOf('agents: []\n')).toMatch(/agents: lists no agent/);
    expect(errorOf(`version: 1\nagents:\n${entry(GOOD)}\n`)).toMatch(
      /^agents\.yaml:1:1: version: unknown field/,
    );
  });

  it('refuses invalid YAML with its position, duplicate keys and alias bombs', () => {
    expect(errorOf('agents:\n  - id: [a\n')).toMatch(/^agents\.yaml:\d+:\d+: \(yaml\): invalid YAML/);
    expect(errorOf(`agents:\n${entry(GOOD)}\n    id: again\n`)).toMatch(
      /\(yaml\): invalid YAML: Map keys must be unique/,
    );
    const bomb = ['a: &a [x, x, x, x, x, x, x, x, x, x]'];
    for (let i = 0; i < 8; i++)
      bomb.push(
        `${'bcdefghi'[i]}: &${'bcdefghi'[i]} [*${i === 0 ? 'a' : 'bcdefghi'[i - 1]}, *${i === 0 ? 'a' : 'bcdefghi'[i - 1]}, *${i === 0 ? 'a' : 'bcdefghi'[i - 1]}]`,
      );
    expect(errorOf(`${bomb.join('\n')}\n`)).toMatch(/YAML refused/);
  });

  it('refuses an oversized file and a missing file', async () => {
    expect(errorOf(`# ${'x'.repeat(300 * 1024)}\nagents: []\n`)).toMatch(/limited to 262144 bytes/);
    await expect(loadAgentsFile('/nonexistent/agents.yaml')).rejects.toThrow(
      /--agents \/nonexistent\/agents\.yaml/,
    );
  });
});
