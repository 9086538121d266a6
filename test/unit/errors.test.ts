import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { problemOf } from '../../src/admin/admin-api.js';
import { TRANSPORT_PROBLEMS, transportProblem } from '../../src/engine/problem-response.js';
import { EffectgateError, ERROR_CODES, type ErrorCode, errorAnswer, PolicyError } from '../../src/errors.js';

describe('error catalogue', () => {
  const docs = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
  const documented = [...docs.matchAll(/^## (EG_ERR_[A-Z_]+)$/gm)].map((m) => m[1]);
  const section = (code: string): string => docs.split(`## ${code}\n`)[1]?.split('\n## ')[0] ?? '';
  const entries = Object.entries(ERROR_CODES) as [ErrorCode, (typeof ERROR_CODES)[ErrorCode]][];

  it('documents exactly the codes src/errors.ts defines, each with a fix', () => {
    expect([...documented].sort()).toEqual(Object.keys(ERROR_CODES).sort());
    for (const code of documented) expect(section(code!), code).toMatch(/\*\*Fix:\*\*/);
  });

  it.each(entries)('%s: the docs give the status and slug it is answered with', (code, entry) => {
    const answer = section(code).match(/^\*\*Answer:\*\* (.+)$/m)?.[1] ?? '';
    const pairs = [...answer.matchAll(/`(\d{3})` `([a-z_]+)`/g)].map((m) => `${m[1]} ${m[2]}`);
    const variants: Record<string, { status: number; type: string }> =
      'variants' in entry ? entry.variants : {};
    expect(pairs, code).toEqual([entry, ...Object.values(variants)].map((a) => `${a.status} ${a.type}`));
  });

  it('gives every code one slug of its own, and only real HTTP statuses', () => {
    const slugs = entries.map(([, e]) => e.type);
    expect(new Set(slugs).size).toBe(slugs.length);
    for (const [code, entry] of entries) {
      expect(entry.type, code).toMatch(/^[a-z][a-z_]*$/);
      expect(entry.status >= 400 && entry.status <= 599, code).toBe(true);
      expect(errorAnswer(code)).toEqual({ status: entry.status, type: entry.type });
    }
  });

  it.each(Object.keys(TRANSPORT_PROBLEMS) as (keyof typeof TRANSPORT_PROBLEMS)[])(
    "the gate's %s refusal is answered as its code's catalogue entry says",
    (problem) => {
      const p: { code: ErrorCode; variant?: string } = TRANSPORT_PROBLEMS[problem];
      const expected = errorAnswer(p.code, p.variant as never);
      const response = transportProblem(problem, 'detail');
      const body = JSON.parse(new TextDecoder().decode(response.body)) as Record<string, unknown>;
      expect(response.status).toBe(expected.status);
      expect(body).toMatchObject({
        type: `urn:effectgate:problem:${expected.type}`,
        status: expected.status,
        code: p.code,
      });
      // The slug the engine names the refusal by is the one it is answered with.
      expect(expected.type).toBe(problem);
    },
  );

  it.each(entries)('the admin API answers %s as the catalogue says', (code, entry) => {
    const problem = problemOf(new EffectgateError(code, 'why'));
    expect({ status: problem.status, type: problem.problem, code: problem.code }).toEqual({
      status: entry.status,
      type: entry.type,
      code,
    });
  });

  it('answers proxy authentication with its own code, not a bad request', () => {
    expect(TRANSPORT_PROBLEMS.proxy_auth_required.code).toBe('EG_ERR_PROXY_AUTH_REQUIRED');
    expect(errorAnswer('EG_ERR_PROXY_AUTH_REQUIRED')).toEqual({ status: 407, type: 'proxy_auth_required' });
  });

  it('keeps the code and cause on wrapped errors', () => {
    const cause = new Error('connection refused');
    const err = new EffectgateError('EG_ERR_STORE_UNAVAILABLE', 'store down', { cause });
    expect(err.code).toBe('EG_ERR_STORE_UNAVAILABLE');
    expect(err.cause).toBe(cause);
  });

  it('formats policy issues as file:line:column: field: message', () => {
    const err = new PolicyError([
      { file: 'p.yaml', line: 3, column: 5, field: 'tools[0].effect', message: 'bad' },
    ]);
    expect(err.code).toBe('EG_ERR_POLICY_INVALID');
    expect(err.message).toBe('p.yaml:3:5: tools[0].effect: bad');
  });
});
