import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PolicyError } from '../../../src/errors.js';
import { loadPolicies, parsePolicyFiles } from '../../../src/policy/index.js';
import { baseWith, fixture, issuesOf, issuesOfAsync, issuesOfText, lines } from './policy-test-helpers.js';

describe('policy file and cross-file errors', () => {
  it('reports a duplicate tool id across two files, naming the earlier location', async () => {
    const issues = await issuesOfAsync(() => loadPolicies(fixture('duplicate-id')));
    expect(issues).toEqual([
      expect.objectContaining({
        file: join(fixture('duplicate-id'), 'b.yaml'),
        line: 9,
        field: 'tools[1].id',
        message: expect.stringContaining(`first declared at ${join(fixture('duplicate-id'), 'a.yaml')}:3`),
      }),
    ]);
  });

  it('refuses two tools that match the same route', () => {
    const issues = issuesOfText(
      baseWith(
        '  - id: t2',
        '    match:',
        '      hosts: [API.example.com:443]', // overlaps: the first tool takes any port
        '      method: post',
        '      path: /items/{other}/', // same shape, other capture name, trailing slash
        '    effect: create',
      ),
    );
    expect(issues).toEqual([
      expect.objectContaining({
        line: 11,
        field: 'tools[1].match',
        message: expect.stringMatching(/tool "t2" matches the same requests as "t" \(p\.yaml:5\)/),
      }),
    ]);
  });

  it('accepts tools on the same route that differ in body conditions, method or port', () => {
    const text = baseWith(
      '  - id: t2',
      '    match:',
      '      hosts: [api.example.com]',
      '      method: POST',
      '      path: /items/{id}',
      '      body: { "$.kind": special }',
      '    effect: create',
      '  - id: t3',
      '    match:',
      '      hosts: [api.example.com]',
      '      method: PUT',
      '      path: /items/{id}',
      '    effect: set_state',
    );
    expect(parsePolicyFiles([{ file: 'p.yaml', text }]).tools.map((t) => t.id)).toEqual(['t', 't2', 't3']);
  });

  it('refuses identical body conditions even when spelled differently', () => {
    const issues = issuesOfText(
      lines(
        'version: 1',
        'tools:',
        '  - id: a',
        '    match: { hosts: [h.example], method: POST, path: /mcp, body: { "$.params.name": x, "$.method": tools/call } }',
        '    effect: create',
        '  - id: b',
        `    match: { hosts: [h.example], method: POST, path: /mcp, body: { "$['method']": tools/call, "$.params.name": x } }`,
        '    effect: create',
      ),
    );
    expect(issues).toEqual([expect.objectContaining({ line: 7, field: 'tools[1].match' })]);
  });

  it('refuses a file larger than 1 MiB before parsing it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'effectgate-policy-'));
    try {
      const file = join(dir, 'big.yaml');
      await writeFile(file, `version: 1\n${'#'.repeat(1024 * 1024)}\n`);
      const issues = await issuesOfAsync(() => loadPolicies(dir));
      expect(issues).toEqual([
        expect.objectContaining({
          file,
          line: 1,
          field: '(file)',
          message: expect.stringContaining('1 MiB'),
        }),
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    const inMemory = issuesOfText(`version: 1\n# ${'x'.repeat(1024 * 1024)}\n`);
    expect(inMemory[0]!.message).toMatch(/limited to 1048576 bytes/);
  });

  it('reports a YAML syntax error with its line', () => {
    // Only the first error is reported: later ones are the parser losing its footing.
    const issues = issuesOfText(
      lines('version: 1', 'tools:', '  - id: t', '    match: x: y', '    effect: read'),
    );
    expect(issues).toEqual([
      {
        file: 'p.yaml',
        line: 4,
        column: 12,
        field: '(yaml)',
        message: expect.stringMatching(/^invalid YAML: Nested mappings/),
      },
    ]);
    const tabs = issuesOfText(lines('version: 1', 'tools:', '  - id: t', '\teffect: read'));
    expect(tabs).toEqual([
      expect.objectContaining({ line: 4, column: 1, message: expect.stringMatching(/Tabs/) }),
    ]);
  });

  it('explains the unquoted {capture} inside a flow mapping trap', () => {
    const issues = issuesOfText(
      lines(
        'version: 1',
        'tools:',
        '  - id: t',
        '    match: { hosts: [a.example], method: GET, path: /a/{id} }',
      ),
    );
    expect(issues[0]).toMatchObject({ line: 4, message: expect.stringContaining('quote values') });
  });

  it('refuses duplicate keys and unknown tags', () => {
    expect(issuesOfText(lines('version: 1', 'version: 1'))[0]).toMatchObject({ line: 2, field: '(yaml)' });
    expect(issuesOfText(lines('version: 1', 'default: !!js/function allow'))[0]).toMatchObject({
      line: 2,
      field: '(yaml)',
    });
  });

  it('refuses an alias expansion bomb', () => {
    const row = (name: string, of: string) => `${name}: &${name} [${Array(9).fill(of).join(', ')}]`;
    const text = lines(
      row('a', '"lol"'),
      row('b', '*a'),
      row('c', '*b'),
      row('d', '*c'),
      row('e', '*d'),
      'version: 1',
    );
    const issues = issuesOfText(text);
    expect(issues).toEqual([
      expect.objectContaining({ field: '(file)', message: expect.stringMatching(/alias/i) }),
    ]);
  });

  it('still accepts a few aliases (shared host lists)', () => {
    const text = lines(
      'version: 1',
      'tools:',
      '  - id: a',
      '    match: { hosts: &hosts [a.example, b.example], method: GET, path: /a }',
      '    effect: read',
      '  - id: b',
      '    match: { hosts: *hosts, method: GET, path: /b }',
      '    effect: read',
    );
    const set = parsePolicyFiles([{ file: 'p.yaml', text }]);
    expect(set.tools[1]!.match.explain()).toBe('GET a.example,b.example /b');
  });

  it('reports conflicting default and loop_breaker across files, naming both files', async () => {
    const issues = await issuesOfAsync(() => loadPolicies(fixture('conflicting-default')));
    const a = join(fixture('conflicting-default'), 'a.yaml');
    const b = join(fixture('conflicting-default'), 'b.yaml');
    expect(issues).toEqual([
      expect.objectContaining({
        file: b,
        line: 2,
        field: 'default',
        message: expect.stringContaining(`allow in ${a}:2`),
      }),
      expect.objectContaining({
        file: b,
        line: 3,
        field: 'loop_breaker.max_duplicate_skips',
        message: expect.stringContaining(`${a}:3`),
      }),
    ]);
  });

  it('lists every issue across all files, not only the first', () => {
    const issues = issuesOf(
      { file: 'a.yaml', text: lines('version: 2', 'tools:', '  - id: x', '    effect: nope') },
      { file: 'b.yaml', text: baseWith('    verdict: { protocol: grpc }') },
    );
    expect(issues.map((i) => `${i.file}:${i.line} ${i.field}`)).toEqual([
      'a.yaml:1 version',
      'a.yaml:3 tools[0]',
      'a.yaml:4 tools[0].effect',
      'b.yaml:9 tools[0].verdict.protocol',
    ]);
  });

  it('throws a PolicyError whose message reads like a compiler', () => {
    try {
      parsePolicyFiles([{ file: 'p.yaml', text: lines('version: 1', 'bogus: 1') }]);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(PolicyError);
      expect((err as PolicyError).code).toBe('EG_ERR_POLICY_INVALID');
      expect((err as Error).message).toMatch(/^p\.yaml:2:1: bogus: unknown field "bogus"/);
    }
  });

  it('refuses an empty folder, a missing path and an empty file list', async () => {
    const empty = await issuesOfAsync(() => loadPolicies(fixture('empty-folder')));
    expect(empty).toEqual([
      expect.objectContaining({
        file: fixture('empty-folder'),
        message: expect.stringMatching(/no \*\.yaml/),
      }),
    ]);
    const missing = await issuesOfAsync(() => loadPolicies(fixture('does-not-exist')));
    expect(missing[0]!.message).toMatch(/ENOENT/);
    expect(() => parsePolicyFiles([])).toThrow(PolicyError);
  });
});
