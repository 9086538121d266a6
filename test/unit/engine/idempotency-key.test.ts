import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { spliceFormField, spliceJsonMember } from '../../../src/engine/body-key-splice.js';
import { gateIdempotencyKey, parseSfString, sfString } from '../../../src/engine/idempotency-key.js';

const enc = new TextEncoder();
const dec = new TextDecoder();
const splice = (body: string, members: string[], key: string): string =>
  dec.decode(spliceJsonMember(enc.encode(body), members, key));

describe('splicing a key into a JSON body', () => {
  it('replaces an existing member, every other byte kept', () => {
    const body =
      '{ "routing_key" : "R1",\n  "dedup_key":"old" , "payload": {"summary": "disk \\"full\\"", "n": [1, {"dedup_key": 2}]}\n}';
    const out = splice(body, ['dedup_key'], 'K-1');
    expect(out).toBe(body.replace('"old"', '"K-1"'));
  });

  it('adds a missing member after the last one, keeping the rest byte for byte', () => {
    const body = '{"routing_key":"R1","payload":{"summary":"s"}}  ';
    expect(splice(body, ['dedup_key'], 'K')).toBe(
      '{"routing_key":"R1","payload":{"summary":"s"},"dedup_key":"K"}  ',
    );
    expect(splice('{ }', ['dedup_key'], 'K')).toBe('{"dedup_key":"K" }');
  });

  it('reaches a nested member, creating the objects that are missing', () => {
    expect(splice('{"meta":{"a":1}}', ['meta', 'key'], 'K')).toBe('{"meta":{"a":1,"key":"K"}}');
    expect(splice('{"a":1}', ['meta', 'key'], 'K')).toBe('{"a":1,"meta":{"key":"K"}}');
    expect(splice('{"meta":{"key":null}}', ['meta', 'key'], 'K')).toBe('{"meta":{"key":"K"}}');
  });

  it('keeps multi-byte text around the member intact', () => {
    const body = '{"title":"Überweisung ✓ 💶","dedup_key":"x","z":"ß"}';
    expect(splice(body, ['dedup_key'], 'K')).toBe('{"title":"Überweisung ✓ 💶","dedup_key":"K","z":"ß"}');
  });

  it('escapes the key as a JSON string', () => {
    expect(JSON.parse(splice('{}', ['k'], 'a"b\\c'))).toEqual({ k: 'a"b\\c' });
  });

  it('refuses a body that is not an object, and a step that is not one', () => {
    expect(() => splice('[1]', ['k'], 'K')).toThrow(/not a JSON object/);
    expect(() => splice('', ['k'], 'K')).toThrow(/not a JSON object/);
    expect(() => splice('{"meta":[1]}', ['meta', 'k'], 'K')).toThrow(/\$\.meta is not an object/);
  });

  it('sets a top-level field of a form body', () => {
    const form = (body: string, key: string): string =>
      dec.decode(spliceFormField(enc.encode(body), ['dedup_key'], key));
    expect(form('a=1&dedup_key=old&b=%C3%BC', 'K 1')).toBe('a=1&dedup_key=K%201&b=%C3%BC');
    expect(form('a=1', 'K')).toBe('a=1&dedup_key=K');
    expect(form('', 'K')).toBe('dedup_key=K');
    expect(() => spliceFormField(enc.encode('a=1'), ['m', 'k'], 'K')).toThrow(/nested/);
  });
});

describe('key formats', () => {
  it('quotes an sf-string (RFC 8941) and reads one back', () => {
    expect(sfString('0190a5b3-7c1e-7d2a-9f00-1234567890ab')).toBe('"0190a5b3-7c1e-7d2a-9f00-1234567890ab"');
    expect(sfString('a"b\\c')).toBe('"a\\"b\\\\c"');
    expect(parseSfString('"a\\"b\\\\c"')).toBe('a"b\\c');
    expect(parseSfString('plain')).toBeNull();
    expect(parseSfString('"bad\\x"')).toBeNull();
    expect(() => sfString('ü')).toThrow(/printable ASCII/);
  });
});

describe('the gate key under max_length', () => {
  const op = '0190a5b3-7c1e-7d2a-9f00-1234567890ab';

  it('is the operation id when it fits', () => {
    expect(gateIdempotencyKey(op, null)).toBe(op);
    expect(gateIdempotencyKey(op, 36)).toBe(op);
    expect(gateIdempotencyKey(op, 255)).toBe(op);
  });

  it('is the first N hex characters of SHA-256(id) when the id is longer: one key per operation', () => {
    const sha = createHash('sha256').update(op).digest('hex');
    expect(gateIdempotencyKey(op, 16)).toBe(sha.slice(0, 16));
    expect(gateIdempotencyKey(op, 32)).toBe(sha.slice(0, 32));
    expect(gateIdempotencyKey(op, 16)).toBe(gateIdempotencyKey(op, 16));
    expect(gateIdempotencyKey(`${op}x`, 16)).not.toBe(gateIdempotencyKey(op, 16));
    const long = 'a'.repeat(200);
    expect(gateIdempotencyKey(long, 100)).toHaveLength(64);
  });
});
