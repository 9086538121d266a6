import { describe, expect, it } from 'vitest';
import { buildArgumentDocument, parseBody } from '../../../src/engine/argument-document.js';
import { ArgumentRefusal } from '../../../src/engine/argument-refusal.js';
import { BODY_LIMITS } from '../../../src/engine/json-scan.js';
import { propose } from '../../../src/engine/proposal.js';
import { refuseRepeatedKeyArguments } from '../../../src/engine/repeated-arguments.js';
import { RouteClassifier } from '../../../src/engine/route-classifier.js';
import type { GateRequest } from '../../../src/engine/types.js';
import { Classifier, parsePolicyFiles, type Tool } from '../../../src/policy/index.js';

const tools = parsePolicyFiles([
  {
    file: 'r.yaml',
    text: `
version: 1
tools:
  - id: shop.refund
    match: { hosts: [shop.example], method: POST, path: /refunds }
    effect: financial
    dedupe: { key: [$.query.order, $.body.title], window: 24h }
  - id: shop.any
    match: { hosts: [shop.example], method: POST, path: /any }
    effect: create
    dedupe: { key: ["$.query.*", "$.query..ref"], window: 24h }
  - id: shop.reconciled
    match: { hosts: [shop.example], method: POST, path: /rec }
    effect: create
    reconcile: { method: GET, path: /rec, items: "$[*]", match: { $.id: "$.query.id[0]" } }
`,
  },
]).tools;
const [refund, any, reconciled] = tools as [Tool, Tool, Tool];

function req(query: string, body: string, contentType = 'application/json'): GateRequest {
  return {
    scheme: 'https',
    method: 'POST',
    host: 'shop.example',
    port: 443,
    path: '/refunds',
    query,
    headers: { 'content-type': contentType },
    body: new TextEncoder().encode(body),
    context: { run: null, step: null, operation: null, worker: null, agentVersion: null, retryReason: null },
  };
}

function refusal(fn: () => unknown): ArgumentRefusal {
  try {
    fn();
  } catch (err) {
    if (err instanceof ArgumentRefusal) return err;
    throw err;
  }
  throw new Error('expected an ArgumentRefusal');
}

function check(tool: Tool, r: GateRequest): void {
  refuseRepeatedKeyArguments(tool, r, buildArgumentDocument(r, {}));
}

describe('parseBody refusals', () => {
  it('refuses a duplicate member with 422 arguments_ambiguous naming its path', () => {
    const err = refusal(() =>
      parseBody(new TextEncoder().encode('{"title":"Refund 42","title":"x1"}'), 'application/json'),
    );
    expect(err).toMatchObject({
      problem: 'arguments_ambiguous',
      path: '$.body.title',
      code: 'EG_ERR_ARGUMENTS_AMBIGUOUS',
    });
    expect(err.message).toContain('$.body.title');
    expect(err.message).toContain('Nothing was sent');
  });

  it('refuses member names that differ only in letter case (Go binds them as one)', () => {
    const err = refusal(() =>
      parseBody(new TextEncoder().encode('{"title":"fresh-3","Title":"Outage"}'), 'application/json'),
    );
    expect(err).toMatchObject({ problem: 'arguments_ambiguous', path: '$.body.Title' });
    expect(parseBody(new TextEncoder().encode('{"title":"a","subtitle":"b"}'), 'application/json')).toEqual({
      title: 'a',
      subtitle: 'b',
    });
  });

  it('leaves a duplicate in a body JSON.parse rejects alone: it is not JSON, so no key reads it', () => {
    expect(parseBody(new TextEncoder().encode('{"a":1,"a":2,}'), 'application/json')).toBeUndefined();
  });

  it('refuses too deep and too many nodes with body_too_complex, and honours given limits', () => {
    const deep = new TextEncoder().encode(`[${'['.repeat(64)}${']'.repeat(64)}]`);
    expect(refusal(() => parseBody(deep, 'application/json'))).toMatchObject({
      problem: 'body_too_complex',
      code: 'EG_ERR_BODY_TOO_COMPLEX',
    });
    expect(parseBody(deep, 'application/json', { maxDepth: 100, maxNodes: 1000 })).toBeInstanceOf(Array);
    const many = new TextEncoder().encode('[1,2,3,4,5]');
    expect(refusal(() => parseBody(many, 'application/json', { maxDepth: 8, maxNodes: 5 })).problem).toBe(
      'body_too_complex',
    );
    const form = new TextEncoder().encode('a=1&b=2&c=3');
    const formType = 'application/x-www-form-urlencoded';
    expect(refusal(() => parseBody(form, formType, { maxDepth: 8, maxNodes: 2 })).path).toBeNull();
    expect(parseBody(form, formType, { maxDepth: 8, maxNodes: 3 })).toEqual({ a: '1', b: '2', c: '3' });
  });

  it('still reads text that is not JSON as no body', () => {
    expect(parseBody(new TextEncoder().encode('hello'), 'text/plain')).toBeUndefined();
    expect(parseBody(new TextEncoder().encode('{"a":1}\n{"a":1}'), 'application/x-ndjson')).toBeUndefined();
  });
});

describe('refuseRepeatedKeyArguments', () => {
  it('refuses a repeated query parameter a key path reads, naming the parameter and the key path', () => {
    const err = refusal(() => check(refund, req('order=42&order=x1', '{"title":"t"}')));
    expect(err).toMatchObject({ problem: 'arguments_ambiguous', path: '$.query.order' });
    expect(err.message).toContain('query parameter $.query.order');
    expect(err.message).toContain('key path $.query.order of tool shop.refund');
  });

  it('leaves a repeat no key path reads alone', () => {
    expect(() => check(refund, req('tag=a&tag=b&order=42', '{"title":"t"}'))).not.toThrow();
  });

  it('refuses a repeated form field a key path reads', () => {
    const form = 'application/x-www-form-urlencoded';
    const err = refusal(() => check(refund, req('order=1', 'title=Refund+42&title=x1', form)));
    expect(err.path).toBe('$.body.title');
    expect(err.message).toContain('form field $.body.title');
    // In a JSON body an array is data, not a repeat.
    expect(() => check(refund, req('order=1', '{"title":["a","b"]}'))).not.toThrow();
  });

  it('catches wildcard, descendant, index and reconcile spellings that reach the repeat', () => {
    expect(refusal(() => check(any, req('x=1&x=2', '{}'))).path).toBe('$.query.x');
    expect(refusal(() => check(any, req('ref=1&ref=2', '{}'))).path).toBe('$.query.ref');
    expect(refusal(() => check(reconciled, req('id=1&id=2', '{}'))).message).toContain('$.query.id[0]');
    expect(() => check(reconciled, req('id=1', '{}'))).not.toThrow();
  });

  it('refuses a name a key path reads that the query and the body both give (Rails, Go FormValue)', () => {
    // Rails: ?title= wins over the JSON body's title, which the key reads.
    const rails = refusal(() => check(refund, req('order=1&title=Outage', '{"title":"fresh-1"}')));
    expect(rails).toMatchObject({ problem: 'arguments_ambiguous', path: '$.body.title' });
    expect(rails.message).toContain('both in the query and in the body');
    // Go FormValue: a form body's order= wins over the ?order= the key reads.
    const form = 'application/x-www-form-urlencoded';
    const go = refusal(() => check(refund, req('order=fresh-2', 'amount=10&order=42&title=t', form)));
    expect(go.path).toBe('$.query.order');
    // A name in both places that no key path reads is left alone.
    expect(() => check(refund, req('order=1&note=a', '{"title":"t","note":"b"}'))).not.toThrow();
  });

  it('refuses a key parameter that reads differently when ; separates parameters (Rack 2, older Python and Go)', () => {
    const err = refusal(() => check(refund, req('order=fresh;order=42', '{"title":"t"}')));
    expect(err).toMatchObject({ problem: 'arguments_ambiguous', path: '$.query.order' });
    // A ; inside a parameter no key path reads, or one that reads the same either way, is left alone.
    expect(() => check(refund, req('order=42&note=a;b', '{"title":"t"}'))).not.toThrow();
  });
});

describe('a body is read one way only', () => {
  const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);
  const problem = (f: () => unknown): string | null => {
    try {
      f();
      return null;
    } catch (err) {
      return err instanceof ArgumentRefusal ? err.problem : 'other';
    }
  };

  it.each([
    ['application/x-www-form-urlencoded'],
    ['text/plain'],
    ['application/vnd.api+json'],
    ['Application/JSON'],
    ['application/json; charset=latin1'],
    [undefined],
  ])('refuses JSON labelled %s as unreadable (415), nothing parsed', (type) => {
    expect(problem(() => parseBody(bytes('{"title":"x"}'), type))).toBe('body_unreadable');
  });

  it('reads application/json (with a UTF-8 charset), forms and multipart fields', () => {
    expect(parseBody(bytes('{"title":"x"}'), 'application/json; charset=UTF-8')).toEqual({ title: 'x' });
    expect(parseBody(bytes('title=x&_method=DELETE'), 'application/x-www-form-urlencoded')).toEqual({
      title: 'x',
      _method: 'DELETE',
    });
    const multipart =
      '--b1\r\nContent-Disposition: form-data; name="title"\r\n\r\nDisk full\r\n' +
      '--b1\r\nContent-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n' +
      '--b1\r\nContent-Disposition: form-data; name="f"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\n{"title":"no"}\r\n--b1--\r\n';
    expect(parseBody(bytes(multipart), 'multipart/form-data; boundary=b1')).toEqual({
      title: 'Disk full',
      _method: 'DELETE',
      f: { filename: 'a.txt' },
    });
  });

  it.each([
    [
      'no boundary',
      'multipart/form-data',
      '--b1\r\nContent-Disposition: form-data; name="a"\r\n\r\nx\r\n--b1--',
    ],
    [
      'an escaped name',
      'multipart/form-data; boundary=b1',
      '--b1\r\nContent-Disposition: form-data; name="a\\"b"\r\n\r\nx\r\n--b1--',
    ],
    [
      'an encoded name',
      'multipart/form-data; boundary=b1',
      "--b1\r\nContent-Disposition: form-data; name*=UTF-8''a\r\n\r\nx\r\n--b1--",
    ],
    [
      'a base64 part',
      'multipart/form-data; boundary=b1',
      '--b1\r\nContent-Disposition: form-data; name="a"\r\nContent-Transfer-Encoding: base64\r\n\r\neA==\r\n--b1--',
    ],
    [
      'no close delimiter',
      'multipart/form-data; boundary=b1',
      '--b1\r\nContent-Disposition: form-data; name="a"\r\n\r\nx',
    ],
  ])('refuses a multipart body with %s', (_what, type, body) => {
    expect(problem(() => parseBody(bytes(body), type))).toBe('body_unreadable');
  });

  it('leaves other bytes under other labels unread (a key into them is missing)', () => {
    expect(parseBody(bytes('hello'), 'text/plain')).toBeUndefined();
    expect(parseBody(bytes('title=x'), undefined)).toBeUndefined();
  });
});

describe('match.json_types: a destination declares the JSON types it reads', () => {
  const set = parsePolicyFiles([
    {
      file: 'k.yaml',
      text: `
version: 1
tools:
  - id: k.patch
    match:
      hosts: [k8s.example]
      method: PATCH
      path: /deployments/{name}
      json_types: [application/merge-patch+json]
    effect: set_state
    dedupe: { key: [$.path.name, $.body.spec.replicas], window: 1h }
  - id: k.other
    match: { hosts: [k8s.example], method: PATCH, path: "/services/{name}" }
    effect: set_state
    dedupe: { key: [$.body.spec.type], window: 1h }
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
  const patch = (path: string, type: string): ReturnType<typeof propose> =>
    propose(ctx, {
      scheme: 'https',
      method: 'PATCH',
      host: 'k8s.example',
      port: 443,
      path,
      query: '',
      headers: { 'content-type': type },
      body: new TextEncoder().encode('{"spec":{"replicas":3,"type":"LB"}}'),
      context: {
        run: null,
        step: null,
        operation: null,
        worker: null,
        agentVersion: null,
        retryReason: null,
      },
    });

  it('reads a declared type as JSON on the tool that declares it', () => {
    const p = patch('/deployments/web', 'application/merge-patch+json');
    expect(p.kind === 'proposal' && p.proposal.key?.values).toEqual(['web', 3]);
  });

  it('refuses the same type on a route whose tool does not declare it, and undeclared types', () => {
    expect(patch('/services/web', 'application/merge-patch+json')).toMatchObject({
      kind: 'refused',
      problem: 'body_unreadable',
    });
    expect(patch('/deployments/web', 'application/json-patch+json')).toMatchObject({
      kind: 'refused',
      problem: 'body_unreadable',
    });
  });

  it('refuses a type that is not a lower-case media type at load, naming file and line', () => {
    expect(() =>
      parsePolicyFiles([
        {
          file: 'bad.yaml',
          text: 'version: 1\ntools:\n  - id: x\n    match: { hosts: [a.example], method: PATCH, path: /a, json_types: ["Application/JSON; charset=utf-8"] }\n    effect: set_state\n',
        },
      ]),
    ).toThrow(/bad\.yaml:4:.*json_types/);
  });
});
