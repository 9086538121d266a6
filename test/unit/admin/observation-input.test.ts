import { describe, expect, it } from 'vitest';
import { InputError } from '../../../src/admin/admin-input.js';
import {
  parseObservation,
  parseOperationSelector,
  parseResolution,
  payloadFingerprint,
} from '../../../src/admin/observation-input.js';

/** The rules every door (CLI, admin API, page) applies to evidence from outside. */
describe('parseResolution', () => {
  const base = { as: 'succeeded', by: ' alice ', reason: 'checked the tracker' };

  it('makes an operator_decision that settles, with the one reference', () => {
    expect(parseResolution('op-1', { ...base, ref: 'https://x.test/1' }, 'cli')).toEqual({
      operationId: 'op-1',
      kind: 'operator_decision',
      by: 'alice',
      reason: 'checked the tracker',
      settles: 'succeeded',
      status: null,
      destinationRef: 'https://x.test/1',
      refs: ['https://x.test/1'],
      payloadFingerprint: null,
      source: 'cli',
    });
  });

  it.each([
    [{ ...base, as: 'open' }, /as must be one of succeeded, failed, duplicate_effect_confirmed/],
    [{ ...base, as: undefined }, /as must be one of/],
    [{ ...base, by: '' }, /by must name who decides/],
    [{ ...base, reason: '  ' }, /reason must say why/],
    [{ ...base, as: 'failed', ref: 'https://x.test/1' }, /resolved as failed had none/],
    [{ ...base, ref: ['a', 'b'] }, /one effect has one reference/],
    [{ ...base, ref: 'bad\u0007ref' }, /ref must be the destination's reference/],
    [
      { ...base, as: 'duplicate_effect_confirmed', ref: Array.from({ length: 21 }, (_, i) => `r${i}`) },
      /at most 20/,
    ],
  ])('refuses %j', (raw, message) => {
    expect(() => parseResolution('op-1', raw, 'api', (f) => `--${f}`)).toThrow(InputError);
    expect(() => parseResolution('op-1', raw, 'api')).toThrow(message);
  });

  it('keeps every distinct reference of a duplicate, in order', () => {
    const r = parseResolution(
      'op-1',
      { ...base, as: 'duplicate_effect_confirmed', ref: ['a', 'b', 'a'] },
      'page',
    );
    expect(r.refs).toEqual(['a', 'b']);
    expect(r.destinationRef).toBe('a');
  });
});

describe('parseObservation', () => {
  it('keeps only the fingerprint of a payload, the same for any member order', () => {
    const a = parseObservation(
      'op-1',
      { kind: 'callback', by: 'hook', payload: { b: 1, a: 'secret-x' } },
      'k1',
    );
    const b = parseObservation(
      'op-1',
      { kind: 'callback', by: 'hook', payload: { a: 'secret-x', b: 1 } },
      'k1',
    );
    expect(a.payloadFingerprint).toMatch(/^hmac-sha256:[0-9a-f]{32}$/);
    expect(a.payloadFingerprint).toBe(b.payloadFingerprint);
    // Keyed: without the store's key, hashing guesses of a short secret finds nothing.
    expect(payloadFingerprint({ a: 'secret-x', b: 1 }, 'k2')).not.toBe(a.payloadFingerprint);
    expect(JSON.stringify(a)).not.toContain('secret-x');
    expect(a).toMatchObject({
      settles: null,
      status: null,
      destinationRef: null,
      source: 'api',
      kind: 'callback',
    });
  });

  it.each([
    [{ kind: 'operator_decision', by: 'x' }, /kind must be one of callback, read_back, operator_note/],
    [{ kind: 'callback' }, /by must name/],
    [{ kind: 'operator_note', by: 'x', settles: 'succeeded' }, /never settles/],
    [{ kind: 'callback', by: 'x', settles: 'unknown' }, /settles must be one of/],
    [{ kind: 'callback', by: 'x', status: 99 }, /HTTP status code/],
    [{ kind: 'callback', by: 'x', status: '200' }, /HTTP status code/],
    [{ kind: 'callback', by: 'x', payload: {}, payload_fingerprint: 'sha256:00' }, /not both/],
    [{ kind: 'callback', by: 'x', payload_fingerprint: 'md5 of it' }, /sha256:<hex>/],
    // Two deliveries differing only in a number beyond 2^53 would read as one.
    [
      { kind: 'callback', by: 'x', payload: JSON.parse('{"event": {"id": 12345678901234567890}}') },
      /beyond what a JSON number carries/,
    ],
    // A lone surrogate is not text (jsonb refuses it): bad input, never a store outage.
    [{ kind: 'callback', by: 'x\ud800' }, /by must name/],
    [{ kind: 'operator_note', by: 'x', note: 'half \udc00 a pair' }, /note must say why/],
    [{ kind: 'callback', by: 'x', destination_ref: 're_\ud800' }, /destination_ref must be/],
  ])('refuses %j', (body, message) => {
    expect(() => parseObservation('op-1', body, 'k1')).toThrow(message);
  });

  it('takes a whole emoji (a surrogate pair) as text', () => {
    expect(parseObservation('op-1', { kind: 'operator_note', by: 'ana 👩‍💻', note: 'ok ✅' }, 'k1').by).toBe(
      'ana 👩‍💻',
    );
  });

  it('refuses a payload nested deeper than the stack, without crashing', () => {
    let deep: unknown = 0;
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(() => payloadFingerprint(deep, 'k1')).toThrow(/nests too deep/);
  });
});

describe('parseOperationSelector', () => {
  it.each([
    [{ id: 'op-1' }, { id: 'op-1' }],
    [{ idempotency_key: 'k-1' }, { idempotencyKey: 'k-1' }],
    [{ destination_ref: 're_1' }, { destinationRef: 're_1' }],
  ])('%j', (given, expected) => {
    expect(parseOperationSelector(given)).toEqual(expected);
  });

  it.each([
    [undefined],
    ['op-1'],
    [{}],
    [{ id: 'a', destination_ref: 'b' }],
    [{ id: { x: 1 } }],
    [{ name: 'x' }],
  ])('refuses %j', (given) => {
    expect(() => parseOperationSelector(given)).toThrow(InputError);
  });
});
