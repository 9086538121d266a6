import { describe, expect, it } from 'vitest';
import { GovernedAddresses } from '../../../src/engine/governed-addresses.js';
import { normalizeHost } from '../../../src/engine/normalize-head.js';
import { RouteClassifier } from '../../../src/engine/route-classifier.js';
import type { GateRequestHead } from '../../../src/engine/types.js';
import { Classifier, parsePolicyFiles } from '../../../src/policy/index.js';

const policies = parsePolicyFiles([
  {
    file: 'p.yaml',
    text: `
version: 1
tools:
  - id: t.delete
    match: { hosts: [svc.internal], method: DELETE, path: "/items/{id}" }
    effect: destroy
  - id: t.literal
    match: { hosts: [10.0.0.9], method: POST, path: /literal }
    effect: create
`,
  },
]);

function head(
  host: string,
  method: string,
  path: string,
  extra: Partial<GateRequestHead> = {},
): GateRequestHead {
  return {
    scheme: 'http',
    method,
    host,
    port: 80,
    path,
    query: '',
    headers: {},
    context: { run: null, step: null, operation: null, worker: null, agentVersion: null, retryReason: null },
    ...extra,
  };
}

async function resolved(
  answers: Record<string, string[]>,
): Promise<{ routes: RouteClassifier; lookups: string[] }> {
  const lookups: string[] = [];
  const classifier = new Classifier(policies);
  const addresses = new GovernedAddresses(classifier.exactNames, {
    lookup: async (name) => {
      lookups.push(name);
      const found = answers[name];
      if (found === undefined) throw new Error('ENOTFOUND');
      return found.map((address) => ({ address }));
    },
  });
  await addresses.start();
  addresses.stop();
  return { routes: new RouteClassifier(classifier, addresses), lookups };
}

describe('normalizeHost', () => {
  it('canonicalizes IP literals in every form', () => {
    expect(normalizeHost('[::FFFF:127.0.0.1]')).toBe('127.0.0.1');
    expect(normalizeHost('0x7f.1')).toBe('127.0.0.1');
    expect(normalizeHost('[0::1]')).toBe('::1');
    expect(normalizeHost('Example.COM.')).toBe('example.com');
  });
});

describe('GovernedAddresses', () => {
  it('resolves each exact name once per round, and maps addresses back to names', async () => {
    const { routes, lookups } = await resolved({ 'svc.internal': ['10.0.0.5', '::ffff:10.0.0.6'] });
    expect(lookups).toEqual(['svc.internal']);
    expect(routes.classify(head('10.0.0.5', 'DELETE', '/items/1'))).toMatchObject({
      resolvedHost: 'svc.internal',
      method: 'DELETE',
    });
    // A mapped answer is stored canonically: the IPv4 request is recognised.
    expect(routes.classify(head('10.0.0.6', 'DELETE', '/items/1')).candidates).toHaveLength(1);
    expect(routes.classify(head('10.0.0.7', 'DELETE', '/items/1')).candidates).toHaveLength(0);
  });

  it('never blocks: before the first answer nothing is known, and a failing name is simply unknown', async () => {
    const addresses = new GovernedAddresses(['slow.example'], {
      lookup: () => new Promise(() => undefined),
      firstRoundMs: 10,
    });
    await addresses.start();
    expect(addresses.namesFor('10.0.0.5')).toEqual([]);
    addresses.stop();
    const { routes } = await resolved({});
    expect(routes.classify(head('10.0.0.5', 'DELETE', '/items/1')).candidates).toHaveLength(0);
  });

  it('refreshes in the background at most once per name per TTL', async () => {
    let calls = 0;
    const addresses = new GovernedAddresses(['a.example'], {
      ttlMs: 30,
      lookup: async () => {
        calls++;
        return [{ address: '10.0.0.1' }];
      },
    });
    await addresses.start();
    await addresses.start();
    expect(calls).toBe(1);
    await new Promise((r) => setTimeout(r, 100));
    addresses.stop();
    expect(calls).toBeGreaterThanOrEqual(2);
    expect(calls).toBeLessThanOrEqual(5);
  });
});

describe('RouteClassifier', () => {
  it('takes a governed override from headers, query or form body, and ignores an ungoverned one', async () => {
    const { routes } = await resolved({ 'svc.internal': ['10.0.0.5'] });
    const post = (extra: Partial<GateRequestHead>, body?: unknown) =>
      routes.classify(head('svc.internal', 'POST', '/items/1', extra), body);
    expect(post({ headers: { 'x-http-method-override': 'delete' } })).toMatchObject({
      method: 'DELETE',
      override: { method: 'DELETE', source: 'x-http-method-override' },
    });
    expect(post({ headers: { 'x-http-method': 'DELETE' } }).method).toBe('DELETE');
    expect(post({ headers: { 'x-method-override': 'DELETE' } }).method).toBe('DELETE');
    expect(post({ query: 'a=1&_method=DELETE' }).override?.source).toBe('?_method');
    const form = { headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': '16' } };
    expect(post(form, { _method: 'DELETE' }).override?.source).toBe('body _method');
    // A JSON body's `_method` too: Laravel (and Express' method-override getter) honour it.
    const json = { headers: { 'content-type': 'application/json', 'content-length': '20' } };
    expect(post(json, { _method: 'DELETE' }).override?.source).toBe('body _method');
    expect(routes.needsBody(head('svc.internal', 'POST', '/items/1', form))).toBe(true);
    expect(routes.needsBody(head('svc.internal', 'POST', '/items/1', json))).toBe(true);
    expect(routes.needsBody(head('svc.internal', 'POST', '/items/1', { headers: {} }))).toBe(false);
    expect(routes.needsBody(head('svc.internal', 'POST', '/other', form))).toBe(false);
    const ungoverned = post({ headers: { 'x-http-method-override': 'PUT' } });
    expect(ungoverned).toMatchObject({ method: 'POST', override: null });
    expect(ungoverned.candidates).toHaveLength(0);
  });

  it('does not classify an address a tool names literally by another name, and spots near misses by address', async () => {
    const { routes } = await resolved({ 'svc.internal': ['10.0.0.9'] });
    expect(routes.classify(head('10.0.0.9', 'POST', '/literal'))).toMatchObject({ resolvedHost: null });
    expect(routes.classify(head('10.0.0.9', 'DELETE', '/items/2')).resolvedHost).toBe('svc.internal');
    expect(routes.nearMiss(head('10.0.0.9', 'DELETE', '/Items/2'))?.tool.id).toBe('t.delete');
    expect(routes.mayGovern('10.0.0.9', 443)).toBe(true);
    expect(routes.mayGovern('10.0.0.8', 443)).toBe(false);
  });
});
