import { beforeAll, describe, expect, it } from 'vitest';
import { Classifier, loadPolicies, parsePolicyFiles, type RouteInput } from '../../../src/policy/index.js';
import { EXAMPLE_POLICIES, fixture } from './policy-test-helpers.js';

let routes: Classifier;
let mcp: Classifier;

beforeAll(async () => {
  routes = new Classifier(await loadPolicies(fixture('routes.yaml')));
  mcp = new Classifier(await loadPolicies(fixture('mcp-tools.yaml')));
});

function req(host: string, method: string, path: string, port = 443): RouteInput {
  return { host, port, method, path };
}

/** Ids of the candidates, and their params. */
function ids(c: Classifier, input: RouteInput): string[] {
  return c.candidates(input).map((x) => x.tool.id);
}

describe('Classifier route matching', () => {
  it('matches an exact host on any port and captures path segments', () => {
    for (const port of [443, 8080]) {
      const [hit, ...rest] = routes.candidates(
        req('api.example.com', 'POST', '/repos/acme/api/issues', port),
      );
      expect(rest).toEqual([]);
      expect(hit!.tool.id).toBe('exact');
      expect({ ...hit!.params }).toEqual({ owner: 'acme', repo: 'api' });
    }
  });

  it('percent-decodes captures and refuses malformed encodings', () => {
    const [hit] = routes.candidates(req('api.example.com', 'POST', '/repos/ac%20me/a%2Fb/issues'));
    expect({ ...hit!.params }).toEqual({ owner: 'ac me', repo: 'a/b' });
    expect(ids(routes, req('api.example.com', 'POST', '/repos/%E0%A4%A/api/issues'))).toEqual([]);
  });

  it('ignores a trailing slash on the request', () => {
    expect(ids(routes, req('api.example.com', 'POST', '/repos/acme/api/issues/'))).toEqual(['exact']);
    expect(ids(routes, req('x.corp.example', 'GET', '/status'))).toEqual(['wildcard']);
    expect(ids(routes, req('x.corp.example', 'GET', '/status/'))).toEqual(['wildcard']);
  });

  it('compares literal segments exactly and needs every segment', () => {
    for (const path of [
      '/Repos/acme/api/issues',
      '/repos/acme/issues',
      '/repos/acme/api/issues/1',
      '/repos//api/issues',
      'repos/acme/api/issues',
    ]) {
      expect(ids(routes, req('api.example.com', 'POST', path)), path).toEqual([]);
    }
  });

  it('matches methods stored upper-case whatever the policy spelling', () => {
    expect(ids(routes, req('api.mixed.example', 'GET', '/'))).toEqual(['mixed-case']);
    expect(ids(routes, req('api.example.com', 'GET', '/repos/acme/api/issues'))).toEqual([]);
  });

  it('matches wildcard subdomains at any depth but not the apex or a look-alike', () => {
    expect(ids(routes, req('a.corp.example', 'GET', '/status'))).toEqual(['wildcard']);
    expect(ids(routes, req('a.b.corp.example', 'GET', '/status'))).toEqual(['wildcard']);
    expect(ids(routes, req('corp.example', 'GET', '/status'))).toEqual([]);
    expect(ids(routes, req('xcorp.example', 'GET', '/status'))).toEqual([]);
  });

  it('requires the port of a host:port entry', () => {
    expect(ids(routes, req('internal.example', 'PUT', '/things/7', 8443))).toEqual(['ported']);
    expect(ids(routes, req('internal.example', 'PUT', '/things/7', 443))).toEqual([]);
  });

  it('matches IPv4 and IPv6 literals, canonicalised', () => {
    expect(ids(routes, req('::1', 'DELETE', '/things/7', 9000))).toEqual(['ip']);
    expect(ids(routes, req('::1', 'DELETE', '/things/7', 9001))).toEqual([]);
    expect(ids(routes, req('10.0.0.7', 'DELETE', '/things/7', 80))).toEqual(['ip']);
    expect(ids(routes, req('2001:db8::1', 'DELETE', '/things/7'))).toEqual(['ip']);
  });

  it('lists a tool reachable through an exact name and a wildcard once', () => {
    expect(ids(routes, req('api.shop.example', 'POST', '/orders'))).toEqual(['both']);
    expect(ids(routes, req('eu.shop.example', 'POST', '/orders'))).toEqual(['both']);
  });

  it('returns one shared frozen empty array when nothing matches', () => {
    const a = routes.candidates(req('unknown.example', 'GET', '/'));
    const b = routes.candidates(req('api.example.com', 'GET', '/nothing'));
    expect(a).toHaveLength(0);
    expect(a).toBe(b);
    expect(Object.isFrozen(a)).toBe(true);
  });

  it('says which hosts it may govern', () => {
    const { mayGovern } = routes; // a bound property, usable as a callback
    expect(mayGovern('api.example.com')).toBe(true);
    expect(mayGovern('deep.sub.corp.example')).toBe(true);
    expect(mayGovern('::1')).toBe(true);
    expect(mayGovern('corp.example')).toBe(false);
    expect(mayGovern('example.org')).toBe(false);
  });
});

describe('Classifier body conditions', () => {
  const route = req('mcp.example.com', 'POST', '/mcp');
  const call = (name: string) => ({
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: { name, arguments: {} },
  });

  it('offers every tool on the shared route, body-conditioned ones first', () => {
    expect(ids(mcp, route)).toEqual(['mcp.create_ticket', 'mcp.close_ticket', 'mcp.other']);
  });

  it('selects between two MCP tools by the JSON-RPC body', () => {
    const candidates = mcp.candidates(route);
    expect(mcp.select(candidates, call('create_ticket'))?.tool.id).toBe('mcp.create_ticket');
    expect(mcp.select(candidates, call('close_ticket'))?.tool.id).toBe('mcp.close_ticket');
  });

  it('falls back to the tool without body conditions, and only it accepts a non-JSON body', () => {
    const candidates = mcp.candidates(route);
    expect(mcp.select(candidates, call('delete_everything'))?.tool.id).toBe('mcp.other');
    expect(mcp.select(candidates, { method: 'tools/list' })?.tool.id).toBe('mcp.other');
    expect(mcp.select(candidates, undefined)?.tool.id).toBe('mcp.other');
    const conditioned = candidates.filter((c) => c.tool.match.hasBodyConditions);
    expect(mcp.select(conditioned, undefined)).toBeNull();
    expect(mcp.select(conditioned, 'tools/call')).toBeNull();
    expect(mcp.select(conditioned, { method: 'tools/call', params: { name: 'other' } })).toBeNull();
  });
});

describe('Classifier ordering across index buckets', () => {
  it('puts a body-conditioned wildcard tool before a plain exact-host tool', () => {
    const set = parsePolicyFiles([
      {
        file: 'p.yaml',
        text: [
          'version: 1',
          'tools:',
          '  - id: plain',
          '    match: { hosts: [rpc.example.net], method: POST, path: /rpc }',
          '    effect: read',
          '  - id: special',
          '    match: { hosts: ["*.example.net"], method: POST, path: /rpc, body: { $.kind: special } }',
          '    effect: create',
        ].join('\n'),
      },
    ]);
    const c = new Classifier(set);
    const candidates = c.candidates(req('rpc.example.net', 'POST', '/rpc'));
    expect(candidates.map((x) => x.tool.id)).toEqual(['special', 'plain']);
    expect(c.select(candidates, { kind: 'special' })?.tool.id).toBe('special');
    expect(c.select(candidates, { kind: 'other' })?.tool.id).toBe('plain');
  });
});

describe('ToolMatcher', () => {
  it('matches wildcard hosts below the suffix only', async () => {
    const wildcard = (await loadPolicies(fixture('routes.yaml'))).tools.find(
      (t) => t.id === 'wildcard',
    )!.match;
    expect(wildcard.matchRoute(req('a.corp.example', 'GET', '/status'))).not.toBeNull();
    expect(wildcard.matchRoute(req('corp.example', 'GET', '/status'))).toBeNull();
    expect(wildcard.matchRoute(req('xcorp.example', 'GET', '/status'))).toBeNull();
  });

  it('explains a route, and its body conditions', async () => {
    const set = await loadPolicies(EXAMPLE_POLICIES);
    const tool = (id: string) => set.tools.find((t) => t.id === id)!;
    expect(tool('github.create_issue').match.explain()).toBe(
      'POST api.github.com /repos/{owner}/{repo}/issues',
    );
    expect(tool('example.create_issue').match.explain()).toBe(
      'POST 127.0.0.1:9090 /repos/{owner}/{repo}/issues',
    );
    expect(tool('mcp.create_ticket').match.explain()).toBe(
      'POST mcp.example.com /mcp body $.method=tools/call, $.params.name=create_ticket',
    );
  });

  it('matches a route on its own, with the same rules as the classifier', async () => {
    const set = await loadPolicies(EXAMPLE_POLICIES);
    const match = set.tools.find((t) => t.id === 'github.create_issue')!.match;
    expect({ ...match.matchRoute(req('api.github.com', 'POST', '/repos/a/b/issues'))?.params }).toEqual({
      owner: 'a',
      repo: 'b',
    });
    expect(match.matchRoute(req('api.github.com.evil.example', 'POST', '/repos/a/b/issues'))).toBeNull();
    expect(match.matchesBody(undefined)).toBe(true); // no body conditions
  });
});
