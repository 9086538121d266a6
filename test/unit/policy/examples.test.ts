/** `examples:` in a policy file: validated like every other field, with file:line. */
import { describe, expect, it } from 'vitest';
import { parsePolicyFiles, policyExamples } from '../../../src/policy/index.js';
import { baseWith, issuesOfText } from './policy-test-helpers.js';

describe('policy examples', () => {
  it('reads an example with its line, request, default response and expectations', () => {
    const set = parsePolicyFiles([
      {
        file: 'p.yaml',
        text: baseWith(
          '    dedupe: { key: [$.path.id], window: 1h }', // 9
          'examples:', // 10
          '  - name: twice', // 11
          '    request: { method: post, url: "https://api.example.com/items/1", headers: { X-A: 1 }, body: { a: [1, true] } }',
          '    expect: { tool: t, key: ["1"], first: allow, second: duplicate, status: 201 }',
          '  - name: unclassified', // 14
          '    request: { method: GET, url: "http://other.example.com/" }',
          '    response: { status: 200, body: ok }',
          '    expect: { tool: null, first: pass }',
        ),
      },
    ]);
    const [a, b] = policyExamples(set);
    expect(a).toMatchObject({
      name: 'twice',
      at: { file: 'p.yaml', line: 11 },
      request: { method: 'POST', headers: { 'x-a': '1' }, body: { a: [1, true] } },
      response: { status: 201, body: {} },
      expect: { tool: 't', key: ['1'], first: 'allow', second: 'duplicate', status: 201 },
    });
    expect(a!.request.url.href).toBe('https://api.example.com/items/1');
    expect(b).toMatchObject({
      at: { line: 14 },
      request: { body: undefined },
      response: { status: 200, body: 'ok' },
      expect: { tool: null, key: null, second: null, status: null },
    });
  });

  it('refuses unknown fields at every level with file:line and a did-you-mean', () => {
    const issues = issuesOfText(
      baseWith(
        'examples:', // 9
        '  - name: x',
        '    request: { method: POST, url: "https://api.example.com/items/1", bdy: {} }', // 11
        '    expect: { tool: t, frist: allow }', // 12
        '    respons: {}', // 13
      ),
    );
    expect(issues).toEqual([
      expect.objectContaining({
        line: 11,
        field: 'examples[0].request.bdy',
        message: expect.stringContaining('did you mean "body"'),
      }),
      expect.objectContaining({
        line: 12,
        field: 'examples[0].expect',
        message: 'missing required field "first"',
      }),
      expect.objectContaining({ line: 12, field: 'examples[0].expect.frist' }),
      expect.objectContaining({
        line: 13,
        field: 'examples[0].respons',
        message: expect.stringContaining('did you mean "response"'),
      }),
    ]);
  });

  it('refuses bad values: a relative URL, a verdict not in the set, a status out of range', () => {
    const issues = issuesOfText(
      baseWith(
        'examples:', // 9
        '  - name: x',
        '    request: { method: POST, url: /items/1 }', // 11
        '    response: { status: 700 }', // 12
        '    expect: { tool: t, first: skipped }', // 13
      ),
    );
    expect(issues.map((i) => [i.line, i.field])).toEqual([
      [11, 'examples[0].request.url'],
      [12, 'examples[0].response.status'],
      [13, 'examples[0].expect.first'],
    ]);
    expect(issues[2]!.message).toContain(
      'expected one of allow, duplicate, pending, hold, halted, block, would_duplicate, would_pending, would_hold, would_halted, would_block, pass',
    );
  });

  it('refuses an expected tool no file declares', () => {
    const issues = issuesOfText(
      baseWith(
        'examples:', // 9
        '  - name: x',
        '    request: { method: POST, url: "https://api.example.com/items/1" }',
        '    expect: { tool: nope, first: allow }', // 12
      ),
    );
    expect(issues).toEqual([
      expect.objectContaining({
        line: 12,
        field: 'examples[0].expect.tool',
        message: expect.stringContaining('expects tool "nope", which no policy file declares'),
      }),
    ]);
  });
});
