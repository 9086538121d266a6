/**
 * A `match.graphql` tool on an endpoint that carries every mutation: the request's document read
 * as servers read it (a GET query string, a JSON or form POST body), the tool chosen by its root
 * mutation field, the key built over the field's arguments with variables substituted, and every
 * request servers could read two ways refused before the store.
 */
import { describe, expect, it } from 'vitest';
import { BODY_LIMITS } from '../../../src/engine/json-scan.js';
import { type Proposal, type Proposed, propose } from '../../../src/engine/proposal.js';
import { RouteClassifier } from '../../../src/engine/route-classifier.js';
import type { GateRequest } from '../../../src/engine/types.js';
import { PolicyError } from '../../../src/errors.js';
import { Classifier, parsePolicyFiles } from '../../../src/policy/index.js';

const policies = parsePolicyFiles([
  {
    file: 'linear.yaml',
    text: `
version: 1
tools:
  - id: linear.issue_create
    match: { hosts: [api.linear.app], method: POST, path: /graphql, graphql: { mutation: issueCreate } }
    effect: create
    dedupe: { key: [$.graphql.args.input.teamId, $.graphql.args.input.title], window: 24h }
  - id: linear.issue_delete
    match: { hosts: [api.linear.app], method: POST, path: /graphql, graphql: { mutation: issueDelete } }
    effect: destroy
    dedupe: { key: [$.graphql.field, $.graphql.args.id], window: 24h }
`,
  },
]);
const classifier = new Classifier(policies);
const ctx = {
  classifier,
  routes: new RouteClassifier(classifier, { namesFor: () => [] }),
  scope: { tenant: 't', area: 'a', agent: 'bot' },
  authorityKey: null,
  maxDuplicateSkips: 3,
  bodyLimits: BODY_LIMITS,
};

const CREATE =
  'mutation IssueCreate($input: IssueCreateInput!) { issueCreate(input: $input) { success issue { id } } }';

function post(body: unknown, over: Partial<GateRequest> = {}): GateRequest {
  return {
    scheme: 'https',
    method: 'POST',
    host: 'api.linear.app',
    port: 443,
    path: '/graphql',
    query: '',
    headers: { 'content-type': 'application/json' },
    body: new TextEncoder().encode(typeof body === 'string' ? body : JSON.stringify(body)),
    context: { run: null, step: null, operation: null, worker: null, agentVersion: null, retryReason: null },
    ...over,
  };
}

function get(params: Record<string, string>): GateRequest {
  return post('', { method: 'GET', query: new URLSearchParams(params).toString(), headers: {} });
}

function proposal(p: Proposed): Proposal {
  if (p.kind !== 'proposal') throw new Error(`expected a proposal, got ${JSON.stringify(p)}`);
  return p.proposal;
}

function refused(p: Proposed): string {
  if (p.kind !== 'refused') throw new Error(`expected a refusal, got ${p.kind}`);
  return p.problem;
}

const input = { teamId: 'T1', title: 'Disk full', description: 'first' };

describe('a match.graphql tool', () => {
  it('is chosen by the mutation field and keyed over its arguments, variables substituted', () => {
    const p = proposal(
      propose(ctx, post({ query: CREATE, variables: { input }, operationName: 'IssueCreate' })),
    );
    expect(p.tool.id).toBe('linear.issue_create');
    expect(p.key?.values).toEqual(['T1', 'Disk full']);
    expect(p.graphql).toEqual({ field: 'issueCreate', responseName: 'issueCreate' });
    expect(p.common.explain).toBe('POST api.linear.app /graphql graphql mutation issueCreate');
  });

  it('keys one call alike however it is spelled: inline literals, an alias, a fragment, a GET query string', () => {
    const hash = proposal(propose(ctx, post({ query: CREATE, variables: { input } }))).key?.hash;
    const spellings = [
      post({ query: 'mutation { issueCreate(input: {teamId: "T1", title: "Disk full"}) { success } }' }),
      post({
        query:
          'mutation M($t: String = "Disk full") { made: issueCreate(input: {teamId: "T1", title: $t}) { success } }',
      }),
      post({
        query:
          'mutation { ...F } fragment F on Mutation { issueCreate(input: {title: "Disk full", teamId: "T1"}) { success } }',
      }),
      post({ query: CREATE, variables: JSON.stringify({ input }) }),
      get({ query: CREATE, variables: JSON.stringify({ input: { ...input, description: 'second' } }) }),
      post(`query=${encodeURIComponent(CREATE)}&variables=${encodeURIComponent(JSON.stringify({ input }))}`, {
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      }),
    ];
    for (const r of spellings)
      expect(proposal(propose(ctx, r)).key?.hash, r.query || new TextDecoder().decode(r.body)).toBe(hash);
    const aliased = proposal(propose(ctx, spellings[1]!));
    expect(aliased.graphql).toEqual({ field: 'issueCreate', responseName: 'made' });
  });

  it('keys $.graphql.field, and tells two mutations on one endpoint apart', () => {
    const p = proposal(propose(ctx, post({ query: 'mutation { issueDelete(id: "I1") { success } }' })));
    expect(p.tool.id).toBe('linear.issue_delete');
    expect(p.key?.values).toEqual(['issueDelete', 'I1']);
  });

  it('relays a query, an ungoverned mutation, and a GET of the endpoint itself unclassified', () => {
    expect(propose(ctx, post({ query: '{ viewer { id } }' })).kind).toBe('unclassified');
    expect(propose(ctx, post({ query: 'mutation { commentCreate(input: {}) { success } }' })).kind).toBe(
      'unclassified',
    );
    expect(
      propose(
        ctx,
        post({ query: 'mutation { a: commentCreate(input: {}) { id } b: commentDelete(id: "1") { id } }' }),
      ).kind,
    ).toBe('unclassified');
    expect(propose(ctx, get({})).kind).toBe('unclassified');
  });

  it('blocks a call whose key argument is absent (on_missing: block)', () => {
    const p = proposal(
      propose(
        ctx,
        post({ query: 'mutation($t: String) { issueCreate(input: {teamId: "T1", title: $t}) { id } }' }),
      ),
    );
    expect(p.block).toBe(true);
    expect(p.keyError).toBe('key_path_missing: $.graphql.args.input.title');
  });

  it.each([
    [
      'two root mutation fields, one governed',
      post({
        query:
          'mutation { issueCreate(input: {teamId: "T1", title: "x"}) { id } commentCreate(input: {}) { id } }',
      }),
      'arguments_ambiguous',
    ],
    [
      'one governed field twice under two aliases',
      post({
        query:
          'mutation { a: issueCreate(input: {title: "x"}) { id } b: issueCreate(input: {title: "y"}) { id } }',
      }),
      'arguments_ambiguous',
    ],
    ['a syntax error', post({ query: 'mutation { issueCreate(input: { }' }), 'graphql_invalid'],
    [
      'two operations and no operationName',
      post({ query: `${CREATE} query Q { viewer { id } }`, variables: { input } }),
      'graphql_invalid',
    ],
    [
      'an operationName the document does not hold',
      post({ query: CREATE, variables: { input }, operationName: 'Other' }),
      'graphql_invalid',
    ],
    [
      'a query in both the URL and the body',
      post(
        { query: CREATE, variables: { input } },
        { query: `query=${encodeURIComponent('{ viewer { id } }')}` },
      ),
      'arguments_ambiguous',
    ],
    [
      'an operationName in the URL and a document in the body',
      post({ query: CREATE, variables: { input } }, { query: 'operationName=IssueCreate' }),
      'arguments_ambiguous',
    ],
    ['a URL parameter given twice', get({ query: CREATE }), 'arguments_ambiguous', 'query=a&query=b'],
    [
      'a member a case-insensitive binder reads as query',
      post({ Query: CREATE, variables: { input } }),
      'arguments_ambiguous',
    ],
    ['a batch', post([{ query: CREATE, variables: { input } }]), 'graphql_invalid'],
    [
      'a raw application/graphql document',
      post('mutation { issueCreate(input: {title: "x"}) { id } }', {
        headers: { 'content-type': 'application/graphql' },
      }),
      'graphql_invalid',
    ],
    [
      'a persisted query without its document',
      post({ extensions: { persistedQuery: { version: 1, sha256Hash: 'ab' } }, variables: { input } }),
      'graphql_invalid',
    ],
    ['variables that are no object', post({ query: CREATE, variables: [input] }), 'graphql_invalid'],
    ['variables that are no JSON', get({ query: CREATE, variables: '{input:' }), 'graphql_invalid'],
    [
      'a document past the token limit',
      post({
        query: `mutation { issueCreate(input: {title: "x"}) { ${'id '.repeat(BODY_LIMITS.maxNodes)} } }`,
      }),
      'graphql_invalid',
    ],
  ] as const)('refuses %s', (_name, request, problem, rawQuery?: string) => {
    const r = rawQuery === undefined ? request : { ...request, query: rawQuery };
    expect(refused(propose(ctx, r))).toBe(problem);
  });
});

describe('match.graphql in a policy', () => {
  function issues(text: string): string {
    try {
      parsePolicyFiles([{ file: 'p.yaml', text: `version: 1\ntools:\n${text}` }]);
    } catch (err) {
      if (err instanceof PolicyError) return err.message;
      throw err;
    }
    return '';
  }

  it('refuses a mutation name that is no GraphQL name, and an unknown member', () => {
    expect(
      issues(`  - id: t
    match: { hosts: [h.example], method: POST, path: /graphql, graphql: { mutation: "issue-create" } }
    effect: create`),
    ).toContain('"issue-create" is not a GraphQL field name');
    expect(
      issues(`  - id: t
    match: { hosts: [h.example], method: POST, path: /graphql, graphql: { query: issues } }
    effect: create`),
    ).toMatch(/query/);
  });

  it('refuses $.graphql paths in a tool without match.graphql, and $.graphql members it does not hold', () => {
    expect(
      issues(`  - id: t
    match: { hosts: [h.example], method: POST, path: /graphql }
    effect: create
    dedupe: { key: [$.graphql.args.title], window: 1h }`),
    ).toContain('this tool has none');
    expect(
      issues(`  - id: t
    match: { hosts: [h.example], method: POST, path: /graphql, graphql: { mutation: a } }
    effect: create
    dedupe: { key: [$.graphql.variables.title], window: 1h }`),
    ).toContain('$.graphql holds field');
  });

  it('lets two tools claim one endpoint by their mutations, but not the same mutation twice', () => {
    expect(
      issues(`  - id: a
    match: { hosts: [h.example], method: POST, path: /graphql, graphql: { mutation: a } }
    effect: create
  - id: b
    match: { hosts: [h.example], method: POST, path: /graphql, graphql: { mutation: b } }
    effect: create`),
    ).toBe('');
    expect(
      issues(`  - id: a
    match: { hosts: [h.example], method: POST, path: /graphql, graphql: { mutation: a } }
    effect: create
  - id: b
    match: { hosts: [h.example], method: POST, path: /graphql, graphql: { mutation: a } }
    effect: create`),
    ).toContain('matches the same requests');
  });
});
