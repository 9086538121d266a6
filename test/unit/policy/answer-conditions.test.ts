/**
 * `outcome.failed_if`, `outcome.unknown_if` and `outcome.error_code` (docs/policy-reference.md): a
 * destination that answers 200 and says in the body that nothing happened (Slack's
 * `{"ok": false}`) is read on its own terms. Bad conditions are config errors at file:line:column.
 */
import { describe, expect, it } from 'vitest';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { baseWith, issuesOfText } from './policy-test-helpers.js';

function outcome(...rows: string[]) {
  return parsePolicyFiles([{ file: 'p.yaml', text: baseWith(...rows) }]).tools[0]!.outcome;
}

const located = (text: string): string[] =>
  issuesOfText(text).map((i) => `${i.file}:${i.line}:${i.column}: ${i.field}: ${i.message}`);

describe('outcome answer conditions', () => {
  it('reads the short map form, one equality per entry, and explains it', () => {
    const o = outcome('    outcome:', '      failed_if: { $.ok: false, $.status: "rejected" }');
    expect(o.failedIf?.explain()).toBe('$.ok == false or $.status == "rejected"');
    expect(o.unknownIf).toBeNull();
    expect(Object.isFrozen(o.failedIf)).toBe(true);
    expect(Object.isFrozen(o.failedIf?.conditions)).toBe(true);
  });

  it('reads the list form of {path, equals} and {path, non_empty: true}', () => {
    const o = outcome(
      '    outcome:',
      '      unknown_if:',
      '        - { path: $.job.id, non_empty: true }',
      '        - { path: $.state, equals: queued }',
      '      error_code: $.error',
    );
    expect(o.unknownIf?.explain()).toBe('$.job.id non_empty or $.state == "queued"');
    expect(o.errorCode?.expression).toBe('$.error');
  });

  it('leaves a tool without conditions as it was', () => {
    const o = outcome('    retry: { budget: 3 }');
    expect(o.failedIf).toBeNull();
    expect(o.unknownIf).toBeNull();
    expect(o.errorCode).toBeNull();
  });

  it('locates a bad JSONPath key', () => {
    const issues = located(baseWith('    outcome:', '      failed_if: { ok: false }'));
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatch(/^p\.yaml:10:20: tools\[0\]\.outcome\.failed_if(\.ok)?: invalid JSONPath/);
  });

  it('refuses a mapping or list as the value of a short-form equality', () => {
    const issues = located(baseWith('    outcome:', '      failed_if: { $.ok: [false] }'));
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatch(/^p\.yaml:10:26: .*failed_if.*: .*string, number, boolean or null/);
  });

  it('refuses a list item with both tests, neither, or non_empty other than true', () => {
    const both = located(
      baseWith(
        '    outcome:',
        '      failed_if:',
        '        - { path: $.ok, equals: false, non_empty: true }',
      ),
    );
    expect(both[0]).toMatch(
      /^p\.yaml:11:11: tools\[0\]\.outcome\.failed_if\[0\]: .*exactly one of equals or non_empty/,
    );
    const neither = located(baseWith('    outcome:', '      failed_if:', '        - { path: $.ok }'));
    expect(neither[0]).toMatch(/^p\.yaml:11:11: .*exactly one of equals or non_empty/);
    const falsy = located(
      baseWith('    outcome:', '      failed_if:', '        - { path: $.ok, non_empty: false }'),
    );
    expect(falsy[0]).toMatch(/^p\.yaml:11:36: .*non_empty.*: must be true/);
    const unknownField = located(
      baseWith('    outcome:', '      failed_if:', '        - { path: $.ok, equal: false }'),
    );
    expect(
      unknownField.some((i) => /^p\.yaml:11:25: .*unknown field "equal"; did you mean "equals"\?/.test(i)),
    ).toBe(true);
  });

  it('refuses an empty list or mapping (it would decide nothing)', () => {
    expect(located(baseWith('    outcome:', '      failed_if: []'))[0]).toMatch(
      /^p\.yaml:10:18: .*failed_if: must name at least one condition/,
    );
    expect(located(baseWith('    outcome:', '      unknown_if: {}'))[0]).toMatch(
      /^p\.yaml:10:19: .*unknown_if: must name at least one condition/,
    );
  });

  it('refuses a bad error_code path', () => {
    expect(located(baseWith('    outcome:', '      error_code: error'))[0]).toMatch(
      /^p\.yaml:10:19: tools\[0\]\.outcome\.error_code: invalid JSONPath/,
    );
  });
});

describe('AnswerConditions.match', () => {
  const o = outcome(
    '    outcome:',
    '      failed_if: { $.ok: false, $.n: 0, $.none: null }',
    '      unknown_if:',
    '        - { path: "$.warnings[*]", equals: "in_progress" }',
    '        - { path: $.job, non_empty: true }',
  );

  it('names the first condition that holds, by its text', () => {
    expect(o.failedIf?.match({ ok: false })).toBe('$.ok == false');
    expect(o.failedIf?.match({ ok: true, n: 0 })).toBe('$.n == 0');
    expect(o.failedIf?.match({ ok: true })).toBeNull();
  });

  it('compares by JSON type: "false" is not false, "0" is not 0', () => {
    expect(o.failedIf?.match({ ok: 'false', n: '0' })).toBeNull();
  });

  it('takes an explicit null, but not a missing member, as equal to null', () => {
    expect(o.failedIf?.match({ none: null })).toBe('$.none == null');
    expect(o.failedIf?.match({})).toBeNull();
  });

  it('holds when any value a path selects matches', () => {
    expect(o.unknownIf?.match({ warnings: ['x', 'in_progress'] })).toBe('$.warnings[*] == "in_progress"');
  });

  it('calls null, "", [] and {} empty, anything else non-empty', () => {
    for (const job of [null, '', [], {}]) expect(o.unknownIf?.match({ job }), JSON.stringify(job)).toBeNull();
    for (const job of [0, false, 'j1', [1], { id: 1 }])
      expect(o.unknownIf?.match({ job }), JSON.stringify(job)).toBe('$.job non_empty');
  });
});

describe('outcome.accepted', () => {
  it('reads exact 2xx codes, and accepted_ref', () => {
    const o = outcome('    outcome:', '      accepted: [202, "203"]', '      accepted_ref: $.id');
    expect(o.accepted).toEqual([202, 203]);
    expect(o.acceptedRef?.expression).toBe('$.id');
    expect(outcome('    retry: { budget: 3 }').accepted).toEqual([]);
  });

  it('refuses a class, a status outside 2xx, or a code another list names', () => {
    expect(located(baseWith('    outcome:', '      accepted: [2xx]'))[0]).toMatch(
      /^p\.yaml:10:18: tools\[0\]\.outcome\.accepted\[0\]: must be an exact 2xx status code/,
    );
    expect(located(baseWith('    outcome:', '      accepted: [302]'))[0]).toMatch(
      /must be an exact 2xx status code/,
    );
    expect(
      located(baseWith('    outcome:', '      succeeded: [2xx, 202]', '      accepted: [202]'))[0],
    ).toMatch(/^p\.yaml:11:18: .*202 is listed in both succeeded and accepted/);
  });
});
