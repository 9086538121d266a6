import { describe, expect, it } from 'vitest';
import { canonicalJson, hmacRef, sha256Ref } from '../../../src/engine/canonical-json.js';

describe('canonicalJson (RFC 8785)', () => {
  it('sorts members by UTF-16 code units and drops whitespace', () => {
    expect(canonicalJson({ b: 1, a: { d: [true, null], c: 'x' } })).toBe(
      '{"a":{"c":"x","d":[true,null]},"b":1}',
    );
    // RFC 8785 §3.2.3: code-unit order puts "\u20ac" (U+20AC) before "\ud83d\ude00" and after "\u0080".
    expect(canonicalJson({ '\u20ac': 1, '\ud83d\ude00': 2, '\u0080': 3, '1': 4 })).toBe(
      '{"1":4,"\u0080":3,"\u20ac":1,"\ud83d\ude00":2}',
    );
  });

  it('serializes numbers as ECMAScript does (RFC 8785 §3.2.2.3 examples)', () => {
    expect(canonicalJson([1e21, 1e-7, 0.000001, -0, 333333333.3333333, 1.0])).toBe(
      '[1e+21,1e-7,0.000001,0,333333333.3333333,1]',
    );
  });

  it('escapes strings minimally', () => {
    expect(canonicalJson('\u0008\n"\\\u001f\u007f')).toBe('"\\b\\n\\"\\\\\\u001f\u007f"');
  });

  it('skips undefined members, maps undefined array items to null, refuses non-finite numbers', () => {
    expect(canonicalJson({ a: undefined, b: [undefined] })).toBe('{"b":[null]}');
    expect(() => canonicalJson(Number.NaN)).toThrow(/non-finite/);
    expect(() => canonicalJson(() => 1)).toThrow(/function/);
  });

  it('gives equal text for semantically equal documents', () => {
    expect(canonicalJson(JSON.parse('{ "x": 1, "y": [ 2 ] }'))).toBe(canonicalJson({ y: [2], x: 1 }));
  });
});

describe('fingerprints', () => {
  it('sha256Ref is prefixed and stable', () => {
    expect(sha256Ref('abc')).toBe('sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
  it('hmacRef depends on the key', () => {
    expect(hmacRef('k1', 'secret')).not.toBe(hmacRef('k2', 'secret'));
    expect(hmacRef('k1', 'secret')).toMatch(/^hmac-sha256:[0-9a-f]{32}$/);
  });
});
