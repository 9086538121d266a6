import { describe, expect, it } from 'vitest';
import type { ArgumentDocument } from '../../../src/engine/argument-document.js';
import { buildArgumentDocument } from '../../../src/engine/argument-document.js';
import { requestFingerprint } from '../../../src/engine/request-fingerprint.js';
import { buildSemanticKey } from '../../../src/engine/semantic-key.js';
import type { GateRequest } from '../../../src/engine/types.js';
import { parsePolicyFiles, type Tool } from '../../../src/policy/index.js';

const [tool] = parsePolicyFiles([
  {
    file: 'k.yaml',
    text: `
version: 1
tools:
  - id: gh.create_issue
    match: { hosts: [api.github.com], method: POST, path: "/repos/{owner}/{repo}/issues" }
    effect: create
    dedupe: { key: [$.path.owner, $.path.repo, $.body.title, $.body.token], window: 24h }
    redact: [$.body.token]
    fingerprint: { ignore: [$.body.trace_id, "$.body.labels[0]"] }
`,
  },
]).tools as [Tool];

const scope = { tenant: 'acme', area: 'support', agent: 'bot' };
const args = (body: unknown, owner = 'acme'): ArgumentDocument => ({
  path: { owner, repo: 'api' },
  query: {},
  body,
});

function req(body: unknown): GateRequest {
  return {
    scheme: 'https',
    method: 'POST',
    host: 'api.github.com',
    port: 443,
    path: '/repos/acme/api/issues',
    query: '',
    headers: { 'content-type': 'application/json' },
    body: new TextEncoder().encode(JSON.stringify(body)),
    context: { run: null, step: null, operation: null, worker: null, agentVersion: null, retryReason: null },
  };
}

describe('buildSemanticKey', () => {
  const body = { title: 'Disk full', token: 's3cret', trace_id: 'a' };

  it('is the same for the same declared values whatever else the body carries', () => {
    const a = buildSemanticKey(tool, scope, args(body));
    const b = buildSemanticKey(tool, scope, args({ ...body, trace_id: 'b', extra: [1, 2] }));
    expect(a.ok && b.ok && a.hash === b.hash).toBe(true);
  });

  it('always includes tenant, area, agent and tool id', () => {
    const base = buildSemanticKey(tool, scope, args(body));
    for (const other of [
      { ...scope, tenant: 'globex' },
      { ...scope, area: 'billing' },
      { ...scope, agent: 'bot-2' },
    ]) {
      const k = buildSemanticKey(tool, other, args(body));
      expect(k.ok && base.ok && k.hash !== base.hash).toBe(true);
    }
    const otherTool = { ...tool, id: 'gh.create_issue_v2' } as Tool;
    const t = buildSemanticKey(otherTool, scope, args(body));
    expect(t.ok && base.ok && t.hash !== base.hash).toBe(true);
  });

  it('changes when a declared value changes', () => {
    const a = buildSemanticKey(tool, scope, args(body));
    const b = buildSemanticKey(tool, scope, args(body, 'other-owner'));
    expect(a.ok && b.ok && a.hash !== b.hash).toBe(true);
  });

  it('reports absent paths as missing, never as empty values', () => {
    const k = buildSemanticKey(tool, scope, args({ token: 'x' }));
    expect(k).toEqual({ ok: false, reason: 'key_path_missing', paths: ['$.body.title'] });
    expect(buildSemanticKey(tool, scope, args(undefined))).toEqual({
      ok: false,
      reason: 'key_path_missing',
      paths: ['$.body.title', '$.body.token'],
    });
  });

  it('refuses values that would not survive the store unchanged', () => {
    for (const title of [
      2 ** 53 + 2,
      Number.POSITIVE_INFINITY,
      'a\u0000b',
      '\ud800',
      { deep: [1, 2 ** 60] },
    ]) {
      const k = buildSemanticKey(tool, scope, args({ title, token: 't' }));
      expect(k.ok, String(title)).toBe(false);
      if (!k.ok) expect(k.reason).toBe('key_value_invalid');
    }
  });

  it('keeps a present null or empty string as a value', () => {
    expect(buildSemanticKey(tool, scope, args({ title: '', token: null })).ok).toBe(true);
  });

  it('stores redacted key values only as a fingerprint', () => {
    const k = buildSemanticKey(tool, scope, args(body));
    if (!k.ok) throw new Error('expected a key');
    expect(k.values.slice(0, 3)).toEqual(['acme', 'api', 'Disk full']);
    expect(k.values[3]).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(JSON.stringify(k.values)).not.toContain('s3cret');
  });

  it('keys the fingerprint of a redacted value with the authority key; the key hash does not move', () => {
    const plain = buildSemanticKey(tool, scope, args(body));
    const a = buildSemanticKey(tool, scope, args(body), 'k'.repeat(32));
    const b = buildSemanticKey(tool, scope, args(body), 'j'.repeat(32));
    if (!plain.ok || !a.ok || !b.ok) throw new Error('expected keys');
    expect(a.values[3]).toMatch(/^hmac-sha256:[0-9a-f]{32}$/);
    expect(a.values[3]).not.toBe(b.values[3]);
    // A dictionary over SHA-256 no longer finds the secret in key_values…
    expect(a.values).not.toContain(plain.values[3]);
    // …and duplicates are recognised exactly as before, whatever the key.
    expect(a.hash).toBe(plain.hash);
    expect(b.hash).toBe(plain.hash);
  });
});

describe('requestFingerprint', () => {
  const fp = (body: unknown): string => {
    const r = req(body);
    return requestFingerprint(r, tool, buildArgumentDocument(r, { owner: 'acme', repo: 'api' }));
  };

  it('ignores volatile and secret fields, array items included', () => {
    const base = fp({ title: 't', token: 'a', trace_id: '1', labels: ['x', 'bug'] });
    expect(fp({ trace_id: '2', title: 't', token: 'b', labels: ['y', 'bug'] })).toBe(base);
    expect(fp({ title: 't', labels: ['bug'] })).not.toBe(base);
  });

  it('changes when a material field changes', () => {
    expect(fp({ title: 't1' })).not.toBe(fp({ title: 't2' }));
  });

  it('does not mutate the argument document', () => {
    const r = req({ title: 't', token: 'a', trace_id: '1' });
    const doc = buildArgumentDocument(r, { owner: 'acme', repo: 'api' });
    requestFingerprint(r, tool, doc);
    expect(doc.body).toEqual({ title: 't', token: 'a', trace_id: '1' });
  });
});

describe('key values conflate by default (dedupe.scalars)', () => {
  const [conflating, exact] = parsePolicyFiles([
    {
      file: 'c.yaml',
      text: `
version: 1
tools:
  - id: pay.refund
    match: { hosts: [pay.example], method: POST, path: /refunds }
    effect: financial
    dedupe: { key: [$.body.charge, $.body.amount], window: 24h }
  - id: pay.refund_exact
    match: { hosts: [pay.example], method: POST, path: /refunds-exact }
    effect: financial
    dedupe: { key: [$.body.charge, $.body.amount], window: 24h, scalars: exact }
`,
    },
  ]).tools as [Tool, Tool];
  const hash = (t: Tool, body: unknown): string => {
    const k = buildSemanticKey(t, scope, { path: {}, query: {}, body });
    if (!k.ok) throw new Error('no key');
    return k.hash;
  };

  it('keys 100, "100", 100.0 (parsed), "1e2" and a form field "100" as one value', () => {
    const one = hash(conflating, { charge: 'ch_1', amount: 100 });
    expect(hash(conflating, { charge: 'ch_1', amount: '100' })).toBe(one);
    expect(hash(conflating, JSON.parse('{"charge":"ch_1","amount":100.0}'))).toBe(one);
    expect(hash(conflating, { charge: 'ch_1', amount: '1e2' })).toBe(one);
    const form = buildArgumentDocument(
      {
        ...req({}),
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new TextEncoder().encode('charge=ch_1&amount=100'),
      },
      {},
    );
    const k = buildSemanticKey(conflating, scope, form);
    expect(k.ok && k.hash).toBe(one);
    expect(hash(conflating, { charge: 'ch_1', amount: true })).toBe(
      hash(conflating, { charge: 'ch_1', amount: 'true' }),
    );
  });

  it('keeps apart what no cast joins: other numbers, large ids past 2^53, long decimals, null', () => {
    const one = hash(conflating, { charge: 'ch_1', amount: 100 });
    expect(hash(conflating, { charge: 'ch_1', amount: 101 })).not.toBe(one);
    expect(hash(conflating, { charge: 'ch_1', amount: '12345678901234567890' })).not.toBe(
      hash(conflating, { charge: 'ch_1', amount: '12345678901234567891' }),
    );
    expect(hash(conflating, { charge: 'ch_1', amount: '0.1000000000000000055' })).not.toBe(
      hash(conflating, { charge: 'ch_1', amount: '0.1' }),
    );
    expect(hash(conflating, { charge: 'ch_1', amount: null })).not.toBe(
      hash(conflating, { charge: 'ch_1', amount: 'null' }),
    );
  });

  it('keys a string-only key as it always did, and keeps types apart with scalars: exact', () => {
    expect(hash(exact, { charge: 'ch_1', amount: 100 })).not.toBe(
      hash(exact, { charge: 'ch_1', amount: '100' }),
    );
    // Same values, same layout: only the tool id differs between the two tools' hashes.
    const strings = { charge: 'ch_1', amount: '100' };
    const viaConflate = buildSemanticKey({ ...conflating, id: 'pay.refund_exact' } as Tool, scope, {
      path: {},
      query: {},
      body: strings,
    });
    expect(viaConflate.ok && viaConflate.hash).toBe(hash(exact, strings));
  });
});
