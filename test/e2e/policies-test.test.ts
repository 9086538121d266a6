/** `effectgate policies test DIR` as users run it (the built bin): no network, exit 0 or 1. */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/proxy-process.js';

const WRONG = 'test/fixtures/policies/examples-wrong';

/** How many examples the shipped files carry: an `- name:` item under each `examples:`. */
function shippedExampleCount(): number {
  let n = 0;
  for (const f of readdirSync('policies').filter((f) => f.endsWith('.yaml'))) {
    const text = readFileSync(`policies/${f}`, 'utf8');
    const at = text.search(/^examples:/m);
    if (at >= 0) n += text.slice(at).match(/^ {2}- name: /gm)?.length ?? 0;
  }
  return n;
}

describe('effectgate policies test', () => {
  it('passes every example of the shipped library, one ok line each', async () => {
    const r = await runCli(['policies', 'test', 'policies/']);
    expect(r.code, r.stderr + r.stdout).toBe(0);
    const oks = r.stdout.split('\n').filter((l) => l.startsWith('ok '));
    expect(oks.length).toBe(shippedExampleCount());
    expect(oks.length).toBeGreaterThanOrEqual(10);
    expect(oks).toContainEqual(
      expect.stringMatching(/^ok policies\/github\.yaml:\d+ opening an issue twice/),
    );
    expect(oks).toContainEqual(expect.stringMatching(/^ok policies\/stripe\.yaml:\d+ /));
    expect(r.stdout).not.toContain('FAIL');
    expect(r.stdout).toMatch(/^\d+ passed, 0 failed$/m);
  });

  it('fails a wrong expectation with file:line and what it got (exit 1)', async () => {
    const r = await runCli(['policies', 'test', WRONG]);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toContain(`ok ${WRONG}/tracker.yaml:9 right`);
    expect(r.stdout).toContain(
      `FAIL ${WRONG}/tracker.yaml:12 wrong: expected key ["c"], got ["b"]; expected second "allow", got "duplicate"`,
    );
    expect(r.stdout).toMatch(/^1 passed, 1 failed$/m);
  });

  it('answers --json with every example and its result', async () => {
    const r = await runCli(['policies', 'test', WRONG, '--json']);
    expect(r.code).toBe(1);
    const out = JSON.parse(r.stdout) as {
      ok: boolean;
      passed: number;
      failed: number;
      examples: { name: string; line: number; ok: boolean; got: { tool: string; sent: number } }[];
    };
    expect(out).toMatchObject({ ok: false, passed: 1, failed: 1 });
    expect(out.examples.map((e) => [e.name, e.line, e.ok])).toEqual([
      ['right', 9, true],
      ['wrong', 12, false],
    ]);
    // The duplicate was answered by the gate: the fake destination saw the request once.
    expect(out.examples[0]!.got).toMatchObject({ tool: 'tracker.create', sent: 1 });
  });

  it('refuses check-only flags (exit 2)', async () => {
    const r = await runCli(['policies', 'test', 'policies/', '--strict']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('policies test takes only --json');
  });
});
