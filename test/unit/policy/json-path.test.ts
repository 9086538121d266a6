import { describe, expect, it } from 'vitest';
import { compileJsonPath, parseDuration } from '../../../src/policy/index.js';

const args = {
  path: { owner: 'acme' },
  query: {},
  body: { title: 'Bug', tags: ['a', 'b'], nested: { 'x.y': 1, n: null } },
};

describe('compileJsonPath', () => {
  it('returns matched values', () => {
    expect(compileJsonPath('$.path.owner').evaluate(args)).toEqual(['acme']);
    expect(compileJsonPath("$['body']['nested']['x.y']").evaluate(args)).toEqual([1]);
    expect(compileJsonPath('$.body.tags[*]').evaluate(args)).toEqual(['a', 'b']);
    expect(compileJsonPath('$.body.tags[1]').evaluate(args)).toEqual(['b']);
    expect(compileJsonPath('$.body.nested.n').evaluate(args)).toEqual([null]);
    expect(compileJsonPath('$').evaluate(0)).toEqual([0]);
  });

  it('returns [] when the path is absent, whatever the document', () => {
    const p = compileJsonPath('$.body.missing');
    expect(p.evaluate(args)).toEqual([]);
    for (const doc of [undefined, null, 0, '', false, 'text', [], {}]) expect(p.evaluate(doc)).toEqual([]);
    // jsonpath-plus alone would answer these from JavaScript, not from the JSON document.
    expect(compileJsonPath('$.body.title.length').evaluate(args)).toEqual([]);
    expect(compileJsonPath('$.body.title[0]').evaluate(args)).toEqual([]);
    expect(compileJsonPath('$.body.tags.length').evaluate(args)).toEqual([]);
  });

  it('does not reach inherited properties', () => {
    expect(compileJsonPath('$.constructor').evaluate({})).toEqual([]);
    expect(compileJsonPath('$.toString').evaluate({})).toEqual([]);
  });

  it('refuses invalid syntax with a clear message', () => {
    expect(() => compileJsonPath('body.title')).toThrow(/must start with \$/);
    expect(() => compileJsonPath('$.body[')).toThrow(/unterminated \[/);
    expect(() => compileJsonPath('$.body.')).toThrow(/expected a member name/);
    expect(() => compileJsonPath('$.tags[-1]')).toThrow(/use \[-1:\]/);
    expect(() => compileJsonPath('')).toThrow(/non-empty/);
  });

  it('refuses script expressions instead of running them', () => {
    expect(() => compileJsonPath('$..[?(@.x == 1)]')).toThrow(/script evaluation is disabled/);
    expect(() => compileJsonPath('$.a[(@.length-1)]')).toThrow(/script evaluation is disabled/);
    expect(() => compileJsonPath("$['a'].x[?(process.exit())]")).toThrow(/script/);
    expect(() => compileJsonPath('$.a.@string()')).toThrow(/invalid JSONPath/);
  });

  it('keeps the expression as written', () => {
    expect(compileJsonPath("$['body'].title").expression).toBe("$['body'].title");
  });
});

describe('parseDuration', () => {
  it('reads every unit', () => {
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('90s')).toBe(90_000);
    expect(parseDuration('15m')).toBe(900_000);
    expect(parseDuration('24h')).toBe(86_400_000);
    expect(parseDuration('7d')).toBe(604_800_000);
  });

  it('reads permanent as null', () => {
    expect(parseDuration('permanent')).toBeNull();
  });

  it('throws on anything else', () => {
    for (const bad of ['', '10', '1.5h', '5 m', '2w', '1h30m', ' 2s', 'PERMANENT', '-1s']) {
      expect(() => parseDuration(bad), bad).toThrow(/invalid duration/);
    }
  });
});
