import { describe, expect, it } from 'vitest';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { baseWith } from './policy-test-helpers.js';

function outcome(line: string) {
  return parsePolicyFiles([{ file: 'p.yaml', text: baseWith(line) }]).tools[0]!.outcome;
}

describe('OutcomeContract.classify', () => {
  it('classifies by the default classes', () => {
    const o = outcome('    retry: { budget: 3 }');
    expect(o.classify(200)).toBe('succeeded');
    expect(o.classify(201)).toBe('succeeded');
    expect(o.classify(404)).toBe('failed');
    expect(o.classify(503)).toBe('unknown');
  });

  it('lets an exact code override its class', () => {
    const o = outcome('    outcome: { succeeded: [2xx, 409], failed: [4xx], unknown: [5xx] }');
    expect(o.classify(409)).toBe('succeeded');
    expect(o.classify(404)).toBe('failed');
    const o2 = outcome('    outcome: { succeeded: [2xx], failed: [5xx], unknown: [504, "202"] }');
    expect(o2.classify(504)).toBe('unknown');
    expect(o2.classify(500)).toBe('failed');
    expect(o2.classify(202)).toBe('unknown');
    expect(o2.classify(200)).toBe('succeeded');
  });

  it('calls a status nobody listed unknown', () => {
    const o = outcome('    outcome: { succeeded: [201], failed: [], unknown: [] }');
    expect(o.classify(201)).toBe('succeeded');
    for (const status of [200, 302, 404, 500, 99, 600, 201.5, -1])
      expect(o.classify(status), String(status)).toBe('unknown');
  });

  it('keeps the selectors it was given', () => {
    const o = outcome('    outcome: { succeeded: [2xx, 409] }');
    expect(o.succeeded).toEqual([
      { kind: 'class', hundreds: 2 },
      { kind: 'code', code: 409 },
    ]);
    expect(o.failed).toEqual([{ kind: 'class', hundreds: 4 }]);
  });
});
