import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { EffectgateError, ERROR_CODES, PolicyError } from '../../src/errors.js';

describe('error catalogue', () => {
  const docs = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
  const documented = [...docs.matchAll(/^## (EG_ERR_[A-Z_]+)$/gm)].map((m) => m[1]);

  it('documents exactly the codes src/errors.ts defines, each with a fix', () => {
    expect([...documented].sort()).toEqual(Object.keys(ERROR_CODES).sort());
    for (const code of documented) {
      const section = docs.split(`## ${code}\n`)[1]?.split('\n## ')[0] ?? '';
      expect(section, code).toMatch(/\*\*Fix:\*\*/);
    }
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
