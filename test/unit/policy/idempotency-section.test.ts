import { describe, expect, it } from 'vitest';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { baseWith, issuesOfText } from './policy-test-helpers.js';

function toolOf(...extra: string[]) {
  const set = parsePolicyFiles([{ file: 'p.yaml', text: baseWith(...extra) }]);
  return set.tools[0]!;
}

describe('tools[].idempotency dialects', () => {
  it('defaults to the Idempotency-Key header, a token, the agent key kept, no limits', () => {
    const tool = toolOf('    idempotency: {}');
    expect(tool.idempotency).toEqual({
      header: 'Idempotency-Key',
      body: null,
      format: 'token',
      maxLength: null,
      retentionMs: null,
      agentKey: 'keep',
      honored: false,
    });
    // A tool that sends keys reads the draft's replay marker unless it names another.
    expect(tool.response.replayedHeader).toBe('idempotent-replayed');
    expect(Object.isFrozen(tool.idempotency)).toBe(true);
  });

  it('reads every field of a header dialect', () => {
    const tool = toolOf(
      '    idempotency:',
      '      header: X-Request-Key',
      '      format: sf-string',
      '      max_length: 40',
      '      retention: 24h',
      '      agent_key: require',
      '      honored: true',
      '    response: { replayed_header: X-Replayed }',
    );
    expect(tool.idempotency).toMatchObject({
      header: 'X-Request-Key',
      body: null,
      format: 'sf-string',
      maxLength: 40,
      retentionMs: 86_400_000,
      agentKey: 'require',
      honored: true,
    });
    expect(tool.response.replayedHeader).toBe('x-replayed');
  });

  it('reads a body member, and leaves it out of the request fingerprint', () => {
    const tool = toolOf('    idempotency:', '      body: $.meta.dedup_key', '      agent_key: replace');
    expect(tool.idempotency?.header).toBeNull();
    expect(tool.idempotency?.body).toMatchObject({
      path: '$.meta.dedup_key',
      members: ['meta', 'dedup_key'],
    });
    expect(tool.fingerprintIgnore.map((p) => p.expression)).toContain('$.body.meta.dedup_key');
  });

  it.each([
    [
      ['      header: X-Key', '      body: $.key'],
      11,
      'tools[0].idempotency.body',
      /header or body, not both/,
    ],
    [['      body: $.items[0].key'], 10, 'tools[0].idempotency.body', /only member steps/],
    [['      body: $'], 10, 'tools[0].idempotency.body', /must name a member/],
    [['      body: key'], 10, 'tools[0].idempotency.body', /must start with \$/],
    [['      format: quoted'], 10, 'tools[0].idempotency.format', /token|sf-string/],
    [['      max_length: 8'], 10, 'tools[0].idempotency.max_length', /16/],
    [['      retention: forever'], 10, 'tools[0].idempotency.retention', /.+/],
    [['      retention: permanent'], 10, 'tools[0].idempotency.retention', /permanent/],
    [['      agent_key: drop'], 10, 'tools[0].idempotency.agent_key', /keep|replace|require/],
    [['      header: "Bad Header"'], 10, 'tools[0].idempotency.header', /not a valid HTTP header name/],
  ])('refuses %j at the line and column of its value', (rows, line, field, message) => {
    const issues = issuesOfText(baseWith('    idempotency:', ...rows));
    const row = rows[line - 10]!;
    const column = row.indexOf(': ') + 3;
    expect(issues).toEqual([
      expect.objectContaining({
        file: 'p.yaml',
        line,
        column,
        field,
        message: expect.stringMatching(message),
      }),
    ]);
  });
});
