import { describe, expect, it } from 'vitest';
import { BODY_LIMITS } from '../../../src/engine/json-scan.js';
import { propose } from '../../../src/engine/proposal.js';
import { RouteClassifier } from '../../../src/engine/route-classifier.js';
import type { GateRequest } from '../../../src/engine/types.js';
import { Classifier, parsePolicyFiles } from '../../../src/policy/index.js';

// A tool that lets a request without its key out ungoverned (on_missing: allow): a member the
// gate misses but a case-insensitive binder reads must not be that way out.
const set = parsePolicyFiles([
  {
    file: 'f.yaml',
    text: `
version: 1
tools:
  - id: t.set_status
    match: { hosts: [svc.example], method: POST, path: /status }
    effect: set_state
    dedupe: { key: [$.body.status], window: 1h, on_missing: allow }
`,
  },
]);
const classifier = new Classifier(set);
const ctx = {
  classifier,
  routes: new RouteClassifier(classifier, { namesFor: () => [] }),
  scope: { tenant: 't', area: 'a', agent: 'g' },
  authorityKey: null,
  maxDuplicateSkips: 3,
  bodyLimits: BODY_LIMITS,
};
const request = (text: string): GateRequest => ({
  scheme: 'https',
  method: 'POST',
  host: 'svc.example',
  port: 443,
  path: '/status',
  query: '',
  headers: { 'content-type': 'application/json' },
  body: new TextEncoder().encode(text),
  context: { run: null, step: null, operation: null, worker: null, agentVersion: null, retryReason: null },
});

describe('a key member found only by folding names', () => {
  it.each([['{"Status":"down"}'], ['{"STATUS":"down"}'], ['{"\u017ftatus":"down"}']])(
    '%s is refused 422 whatever on_missing says',
    (text) => {
      expect(propose(ctx, request(text))).toMatchObject({
        kind: 'refused',
        problem: 'arguments_ambiguous',
        path: '$.body.status',
      });
    },
  );

  it('a body without the member at all follows on_missing (allow: ungoverned, error recorded)', () => {
    const p = propose(ctx, request('{"state":"down"}'));
    expect(p.kind === 'proposal' && p.proposal.keyError).toBe('key_path_missing: $.body.status');
  });
});
