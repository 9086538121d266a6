import { describe, expect, it } from 'vitest';
import { uuidv7 } from '../../../src/store/uuidv7.js';

describe('uuidv7', () => {
  it('is an RFC 9562 version 7 UUID carrying the current Unix milliseconds', () => {
    const before = Date.now();
    const id = uuidv7();
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const ms = Number.parseInt(id.replaceAll('-', '').slice(0, 12), 16);
    expect(ms).toBeGreaterThanOrEqual(before);
    expect(ms).toBeLessThanOrEqual(Date.now() + 1);
  });

  it('is unique and strictly increasing within one process, even in one millisecond', () => {
    // 10,000 ids draw from the random pool about 25 times: every refill keeps the format.
    const ids = Array.from({ length: 10_000 }, () => uuidv7());
    for (const id of ids)
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Set(ids).size).toBe(ids.length);
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true);
  });
});
