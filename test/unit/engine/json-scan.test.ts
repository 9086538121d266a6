import { describe, expect, it } from 'vitest';
import { appendStep, BODY_LIMITS, scanJson } from '../../../src/engine/json-scan.js';

const MIB = 1024 * 1024;
const loose = { maxDepth: 1_000_000, maxNodes: 10_000_000 };

describe('scanJson', () => {
  it('agrees with JSON.parse on what is JSON: never calls a parsable body not_json', () => {
    const valid = [
      '0',
      '-0.5e+10',
      '"x"',
      'true',
      'null',
      ' \t\r\n[ ] ',
      '{}',
      '{ "a" : [1, 2.5, -3E-2, "s\\"q", {"b": null}], "c": false }',
      '"\\\\"',
      '["\\\\\\"", "\\u00e9", "é", "\\ud800"]',
      '{"":1}',
      JSON.stringify({ deep: [[[{ x: [1, { y: 'z' }] }]]], s: 'a\\"b' }),
    ];
    for (const text of valid) expect(scanJson(text, loose).kind, text).toBe('json');
    const invalid = [
      '',
      ' ',
      '[',
      '[1,]',
      '{"a"}',
      '{"a":}',
      '{a:1}',
      '[1 2]',
      '"open',
      '{"a":1}x',
      'tru',
      '\uFEFF{}',
    ];
    for (const text of invalid) {
      expect(() => JSON.parse(text), text).toThrow();
      // Lenient is allowed (JSON.parse has the last word); calling valid JSON invalid is not.
      expect(['not_json', 'json'], text).toContain(scanJson(text, loose).kind);
    }
    expect(scanJson('[1,]', loose).kind).toBe('not_json');
    expect(scanJson('{"a":1}x', loose).kind).toBe('not_json');
  });

  it('names the first duplicate member anywhere, decoding escapes as JSON.parse does', () => {
    expect(scanJson('{"title":"Refund 42","title":"x1"}', BODY_LIMITS)).toEqual({
      kind: 'duplicate_member',
      path: '$.body.title',
    });
    expect(scanJson('{"items":[{"id":1},{"id":2},{"id":3,"id":4}]}', BODY_LIMITS)).toEqual({
      kind: 'duplicate_member',
      path: '$.body.items[2].id',
    });
    expect(scanJson('{"a":1,"\\u0061":2}', BODY_LIMITS)).toEqual({
      kind: 'duplicate_member',
      path: '$.body.a',
    });
    expect(scanJson('{"x y":{"k":1,"k":2}}', BODY_LIMITS)).toEqual({
      kind: 'duplicate_member',
      path: '$.body["x y"].k',
    });
    // Same name in different objects is not a duplicate; a name that differs only in letter case
    // is (Go's encoding/json binds `A` and `a` to one field).
    expect(scanJson('[{"a":1},{"a":2},{"A":3,"b":4}]', BODY_LIMITS)).toEqual({ kind: 'json' });
    expect(scanJson('[{"a":1},{"a":2},{"A":3,"a":4}]', BODY_LIMITS)).toEqual({
      kind: 'duplicate_member',
      path: '$.body[2].a',
    });
    expect(scanJson('{"__proto__":1,"__proto__":2}', BODY_LIMITS, '$')).toEqual({
      kind: 'duplicate_member',
      path: '$.__proto__',
    });
  });

  it('refuses nesting past maxDepth, naming the container, and counts empty containers too', () => {
    const limits = { maxDepth: 3, maxNodes: 1000 };
    expect(scanJson('[[[1]]]', limits).kind).toBe('json');
    expect(scanJson('[[[[]]]]', limits)).toEqual({ kind: 'too_deep', path: '$.body[0][0][0]' });
    expect(scanJson('{"a":{"b":[0,{"c":1}]}}', limits)).toEqual({ kind: 'too_deep', path: '$.body.a.b[1]' });
  });

  it('counts every value and every member name against maxNodes', () => {
    expect(scanJson('[1,2,3]', { maxDepth: 64, maxNodes: 4 }).kind).toBe('json');
    expect(scanJson('[1,2,3,4]', { maxDepth: 64, maxNodes: 4 }).kind).toBe('too_many_nodes');
    // Root + 2 names + 2 values = 5.
    expect(scanJson('{"a":1,"b":2}', { maxDepth: 64, maxNodes: 5 }).kind).toBe('json');
    expect(scanJson('{"a":1,"b":2}', { maxDepth: 64, maxNodes: 4 }).kind).toBe('too_many_nodes');
  });

  it('lets ordinary 1 MiB payloads through and stops hostile ones at the first limit passed', () => {
    const ordinary = JSON.stringify({
      items: Array.from({ length: 4000 }, (_, i) => ({
        id: i,
        name: `item number ${i}`,
        tags: ['a', 'b'],
        price: 12.5,
        text: 'lorem ipsum dolor sit amet '.repeat(5),
      })),
    });
    expect(ordinary.length).toBeGreaterThan(0.7 * MIB);
    expect(scanJson(ordinary, BODY_LIMITS).kind).toBe('json');
    expect(scanJson(JSON.stringify({ title: 'x', body: 'y'.repeat(MIB) }), BODY_LIMITS).kind).toBe('json');

    const deep = `{"a":${'['.repeat(MIB / 2)}${']'.repeat(MIB / 2)}}`;
    const wide = `{${Array.from({ length: 100_000 }, (_, i) => `"k${i}":0`).join(',')}}`;
    // What stopping early saves is measured by bench/hostile-bodies.ts, not by a timed test.
    expect(scanJson(deep, BODY_LIMITS)).toEqual({ kind: 'too_deep', path: `$.body.a${'[0]'.repeat(63)}` });
    expect(scanJson(wide, BODY_LIMITS).kind).toBe('too_many_nodes');
  });

  it('spells path steps as JSONPath', () => {
    expect(appendStep('$.body', 'title')).toBe('$.body.title');
    expect(appendStep('$.body', 2)).toBe('$.body[2]');
    expect(appendStep('$.query', 'a b')).toBe('$.query["a b"]');
    expect(appendStep('$.query', 'x"y')).toBe('$.query["x\\"y"]');
  });
});

describe('member names fold as Go binds them', () => {
  it.each([
    ['{"status":"a","\u017ftatus":"b"}', '$.body["\u017ftatus"]'],
    ['{"kind":"a","\u212aind":"b"}', '$.body["\u212aind"]'],
    ['{"title":"a","TITLE":"b"}', '$.body.TITLE'],
  ])('%s is a duplicate member', (text, path) => {
    expect(scanJson(text, BODY_LIMITS)).toEqual({ kind: 'duplicate_member', path });
  });

  it('keeps apart names that fold to different letters', () => {
    expect(scanJson('{"status":"a","statuz":"b","st\u00e4tus":"c"}', BODY_LIMITS)).toEqual({ kind: 'json' });
  });
});
