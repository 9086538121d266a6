import { describe, expect, it } from 'vitest';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { BASE_TOOL, baseWith, issuesOfText, lines } from './policy-test-helpers.js';

describe('policy field errors', () => {
  it('names an unknown field and suggests the nearest known one', () => {
    const issues = issuesOfText(
      baseWith('    dedupe:', '      key: [$.path.id]', '      window: 24h', '      pendng_ttl: 2m'),
    );
    expect(issues).toEqual([
      expect.objectContaining({
        file: 'p.yaml',
        line: 12,
        column: 7,
        field: 'tools[0].dedupe.pendng_ttl',
        message: expect.stringContaining('did you mean "pending_ttl"?'),
      }),
    ]);
  });

  it('suggests nothing when an unknown field is not close to any known one', () => {
    const issues = issuesOfText(lines('version: 1', 'colour: blue'));
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({ line: 2, column: 1, field: 'colour' });
    expect(issues[0]!.message).toMatch(/^unknown field "colour" \(known: /);
  });

  it('suggests top-level fields too', () => {
    const issues = issuesOfText(lines('version: 1', 'defualt: block'));
    expect(issues[0]).toMatchObject({
      line: 2,
      field: 'defualt',
      message: expect.stringContaining('"default"'),
    });
  });

  it('refuses a misspelt method with its line and the method it likely meant: it would leave the effect ungoverned', () => {
    const issues = issuesOfText(lines(...BASE_TOOL.slice(0, 5), '      method: PSOT', ...BASE_TOOL.slice(6)));
    expect(issues).toEqual([
      expect.objectContaining({
        line: 6,
        field: 'tools[0].match.method',
        message: expect.stringMatching(
          /^"PSOT" is not an HTTP method \(did you mean POST\?\): a tool that names it would never match/,
        ),
      }),
    ]);
    // Lower case is the same method; an unknown extension method is refused without a guess.
    const patch = parsePolicyFiles([
      { file: 'p.yaml', text: lines(...BASE_TOOL.slice(0, 5), '      method: patch', ...BASE_TOOL.slice(6)) },
    ]);
    expect(patch.tools[0]!.match.explain()).toMatch(/^PATCH /);
    const odd = issuesOfText(
      lines(...BASE_TOOL.slice(0, 5), '      method: FROBNICATE', ...BASE_TOOL.slice(6)),
    );
    expect(odd[0]!.message).toMatch(/^"FROBNICATE" is not an HTTP method: .*\(known: GET, HEAD, POST/);
  });

  it('rejects a bad duration', () => {
    const issues = issuesOfText(baseWith('    dedupe:', '      key: [$.path.id]', '      window: 24 hours'));
    expect(issues).toEqual([
      expect.objectContaining({
        line: 11,
        column: 15,
        field: 'tools[0].dedupe.window',
        message: expect.stringMatching(/invalid duration "24 hours"/),
      }),
    ]);
  });

  it('rejects permanent where only a finite duration makes sense', () => {
    const issues = issuesOfText(
      baseWith(
        '    dedupe:',
        '      key: [$.path.id]',
        '      window: permanent',
        '      pending_ttl: permanent',
      ),
    );
    expect(issues).toEqual([expect.objectContaining({ line: 12, field: 'tools[0].dedupe.pending_ttl' })]);
  });

  it('rejects an invalid JSONPath', () => {
    const issues = issuesOfText(baseWith('    dedupe:', '      key: ["$.body["]', '      window: 1h'));
    expect(issues).toEqual([
      expect.objectContaining({
        line: 10,
        field: 'tools[0].dedupe.key[0]',
        message: expect.stringMatching(/invalid JSONPath "\$\.body\["/),
      }),
    ]);
  });

  it('refuses script JSONPath expressions, filters and dynamic subscripts alike', () => {
    const issues = issuesOfText(
      baseWith('    redact: ["$.body[?(@.secret)]", "$.body.items[(@.length-1)]"]'),
    );
    expect(issues.map((i) => [i.line, i.field])).toEqual([
      [9, 'tools[0].redact[0]'],
      [9, 'tools[0].redact[1]'],
    ]);
    for (const issue of issues) expect(issue.message).toMatch(/script evaluation is disabled/);
  });

  it('names a missing required field at its parent', () => {
    const issues = issuesOfText(lines(...BASE_TOOL.slice(0, 7)));
    expect(issues).toEqual([
      expect.objectContaining({
        line: 3,
        column: 5,
        field: 'tools[0]',
        message: 'missing required field "effect"',
      }),
    ]);
    const noVersion = issuesOfText(lines('tools: []'));
    expect(noVersion).toEqual([
      expect.objectContaining({ line: 1, field: '(file)', message: 'missing required field "version"' }),
    ]);
  });

  it('requires dedupe.key and dedupe.window, pointing at the dedupe key', () => {
    const issues = issuesOfText(baseWith('    dedupe:', '      wait: 1s'));
    expect(issues.map((i) => [i.line, i.field, i.message])).toEqual([
      [9, 'tools[0].dedupe', 'missing required field "key"'],
      [9, 'tools[0].dedupe', 'missing required field "window"'],
    ]);
  });

  it('rejects a value of the wrong type', () => {
    const issues = issuesOfText(
      lines(
        'version: 1',
        'tools:',
        '  - id: t',
        '    match:',
        '      hosts: api.example.com',
        '      method: POST',
        '      path: /items/{id}',
        '    effect: create',
        '    retry: { budget: three }',
      ),
    );
    expect(issues).toEqual([
      expect.objectContaining({
        line: 5,
        column: 14,
        field: 'tools[0].match.hosts',
        message: 'expected a list, got the string "api.example.com"',
      }),
      expect.objectContaining({
        line: 9,
        column: 22,
        field: 'tools[0].retry.budget',
        message: expect.stringMatching(/expected an integer >= 1/),
      }),
    ]);
  });

  it('rejects $.path.X when the path template has no {X} capture', () => {
    const issues = issuesOfText(
      baseWith('    dedupe:', '      key: [$.path.owner, $.path.id]', '      window: 1h'),
    );
    expect(issues).toEqual([
      expect.objectContaining({
        line: 10,
        column: 13,
        field: 'tools[0].dedupe.key[0]',
        message: '$.path.owner: path has no {owner} capture (captures: {id})',
      }),
    ]);
  });

  it('requires argument paths to start at $.path, $.query or $.body', () => {
    const issues = issuesOfText(baseWith('    fingerprint: { ignore: [$.headers.date] }'));
    expect(issues).toEqual([expect.objectContaining({ line: 9, field: 'tools[0].fingerprint.ignore[0]' })]);
  });

  it('validates hosts, methods, path templates and outcome lists', () => {
    const issues = issuesOfText(
      lines(
        'version: 1',
        'tools:',
        '  - id: t',
        '    match:',
        '      hosts: ["*", "a b", "x.example:99999"]',
        '      method: "GE T"',
        '      path: /a/{x}/b{y}',
        '    effect: create',
        '    outcome: { succeeded: [2xx, 409], failed: [409], unknown: [700] }',
      ),
    );
    expect(issues.map((i) => `${i.line}:${i.column} ${i.field}`)).toEqual([
      '5:15 tools[0].match.hosts[0]',
      '5:20 tools[0].match.hosts[1]',
      '5:27 tools[0].match.hosts[2]',
      '6:15 tools[0].match.method',
      '7:13 tools[0].match.path',
      '9:48 tools[0].outcome.failed[0]',
      '9:64 tools[0].outcome.unknown[0]',
    ]);
    expect(issues[5]!.message).toBe('409 is listed in both succeeded and failed');
  });

  it('refuses a status class listed twice, even through a default list', () => {
    const issues = issuesOfText(baseWith('    outcome: { succeeded: [2xx, 4xx] }'));
    expect(issues).toEqual([
      expect.objectContaining({
        line: 9,
        field: 'tools[0].outcome',
        message: '4xx is listed in both succeeded and failed (failed defaults to [4xx])',
      }),
    ]);
  });

  it('refuses a reconcile path placeholder that is not a capture', () => {
    const issues = issuesOfText(
      baseWith('    reconcile:', '      path: /items/{nope}', '      match: { $.id: $.path.id }'),
    );
    expect(issues).toEqual([expect.objectContaining({ line: 10, field: 'tools[0].reconcile.path' })]);
  });
});
