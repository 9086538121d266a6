import { describe, expect, it } from 'vitest';
import { buildArgumentDocument } from '../../../src/engine/argument-document.js';
import { ArgumentRefusal } from '../../../src/engine/argument-refusal.js';
import { CONFLICT, nestedReading } from '../../../src/engine/nested-parameters.js';
import { refuseRepeatedKeyArguments } from '../../../src/engine/repeated-arguments.js';
import type { GateRequest } from '../../../src/engine/types.js';
import { parsePolicyFiles, type Tool } from '../../../src/policy/index.js';

describe('nestedReading (Rails, PHP and qs bracket syntax)', () => {
  it('nests members and arrays, keeps plain and unbalanced names literal', () => {
    expect(nestedReading({ 'a[b][c]': '1', 'tags[]': ['x', 'y'], plain: 'p', 'odd[': 'o' })).toEqual({
      a: { b: { c: '1' } },
      tags: ['x', 'y'],
      plain: 'p',
      'odd[': 'o',
    });
  });

  it('marks a name given both a value and members as a conflict', () => {
    expect(nestedReading({ title: '2', 'title[x]': '1' })['title']).toBe(CONFLICT);
  });
});

describe('a key path that reads another argument when bracketed names nest', () => {
  const [tool] = parsePolicyFiles([
    {
      file: 'n.yaml',
      text: `
version: 1
tools:
  - id: t.notify
    match: { hosts: [n.example], method: POST, path: /notify }
    effect: notify
    dedupe: { key: [$.body.subject], window: 1h, on_missing: allow }
`,
    },
  ]).tools as [Tool];
  const request = (form: string): GateRequest => ({
    scheme: 'https',
    method: 'POST',
    host: 'n.example',
    port: 443,
    path: '/notify',
    query: '',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new TextEncoder().encode(form),
    context: { run: null, step: null, operation: null, worker: null, agentVersion: null, retryReason: null },
  });
  const refused = (form: string): string | null => {
    const r = request(form);
    try {
      refuseRepeatedKeyArguments(tool, r, buildArgumentDocument(r, {}));
      return null;
    } catch (err) {
      return err instanceof ArgumentRefusal ? err.path : 'other';
    }
  };

  it.each([['subject[x]=Outage'], ['subject=a&subject[x]=b'], ['subject[]=a']])(
    'refuses %s (422)',
    (form) => {
      expect(refused(form)).toBe('$.body.subject');
    },
  );

  it('leaves bracketed names no key path reads alone', () => {
    expect(refused('subject=Outage&meta[source]=cron')).toBeNull();
  });
});
