/**
 * The reconciliation lookup against a real loopback destination through the real upstream client:
 * what is asked (URL, method, headers, credentials), and how each answer is read.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildArgumentDocument } from '../../../src/engine/argument-document.js';
import {
  canonicalJson,
  type GateRequest,
  reconcileLookup,
  sha256Ref,
  type UpstreamSender,
} from '../../../src/engine/index.js';
import { parsePolicyFiles, type Tool } from '../../../src/policy/index.js';
import { createUpstreamClient, type UpstreamClient } from '../../../src/proxy/index.js';
import {
  neverAnswer,
  reply,
  startUpstream,
  type Upstream,
  type UpstreamHandler,
} from '../../helpers/upstream.js';

const policies = parsePolicyFiles([
  {
    file: 'inline.yaml',
    text: `
version: 1
tools:
  - id: gh.create_issue
    match: { hosts: [127.0.0.1], method: POST, path: "/repos/{owner}/{repo}/issues" }
    effect: create
    idempotency: { header: Idempotency-Key }
    response: { ref: $.html_url }
    reconcile:
      method: GET
      path: /repos/{owner}/{repo}/issues?state=all
      items: $[*]
      match: { $.title: $.body.title }
  - id: hook.send
    match: { hosts: [127.0.0.1], method: POST, path: "/hooks/{team}/{secret}" }
    effect: notify
    redact: [$.path.secret]
    response: { ref: $.id }
    reconcile:
      path: /hooks/{team}/{secret}/deliveries
      items: $.data[*]
      match: { $.message: $.body.message, $.meta.kind: $.query.kind }
  - id: plain.create
    match: { hosts: [127.0.0.1], method: POST, path: "/plain" }
    effect: create
`,
  },
]);

function tool(id: string): Tool {
  const found = policies.tools.find((t) => t.id === id);
  if (found === undefined) throw new Error(`no tool ${id}`);
  return found;
}

let upstream: Upstream;
let client: UpstreamClient;
let answer: UpstreamHandler = reply(200, []);

beforeAll(async () => {
  upstream = await startUpstream((req, res, raw) => answer(req, res, raw));
  client = createUpstreamClient();
});
afterAll(async () => {
  await client?.close();
  await upstream?.close();
});
beforeEach(() => {
  upstream.requests.length = 0;
  answer = reply(200, []);
});

interface Proposal {
  readonly path: string;
  readonly query?: string;
  readonly params: Record<string, string>;
  readonly body: unknown;
  readonly headers?: Record<string, string>;
  readonly port?: number;
}

/** Runs the lookup for a proposal the way the gate would: same origin, same headers, parsed args. */
function lookup(toolId: string, p: Proposal, send: UpstreamSender = client.send, timeoutMs = 5_000) {
  const request: GateRequest = {
    scheme: 'http',
    method: 'POST',
    host: '127.0.0.1',
    port: p.port ?? upstream.port,
    path: p.path,
    query: p.query ?? '',
    headers: { 'content-type': 'application/json', ...p.headers },
    body: new TextEncoder().encode(JSON.stringify(p.body)),
    context: { run: 'r1', step: null, operation: null, worker: null, agentVersion: null, retryReason: null },
  };
  return reconcileLookup({
    tool: tool(toolId),
    request,
    args: buildArgumentDocument(request, p.params),
    operationId: 'op-1',
    attemptId: 'at-1',
    send,
    timeoutMs,
  });
}

function issue(title: string): Proposal {
  return { path: '/repos/acme/api/issues', params: { owner: 'acme', repo: 'api' }, body: { title } };
}

function hook(secret: string): Proposal {
  return {
    path: `/hooks/ops/${secret}`,
    query: 'kind=alert',
    params: { team: 'ops', secret },
    body: { message: 'deployed' },
  };
}

const ISSUES = [
  { title: 'Crash on start', html_url: 'https://gh/acme/api/issues/1' },
  { title: 'Slow build', html_url: 'https://gh/acme/api/issues/2' },
  { title: 'Crash on start', html_url: 'https://gh/acme/api/issues/3' },
  { title: 'Typo in README', html_url: 'https://gh/acme/api/issues/4' },
];

describe('reconcileLookup', () => {
  it('finds exactly one matching item and reports its destination reference', async () => {
    answer = reply(200, ISSUES);
    const got = await lookup('gh.create_issue', issue('Slow build'));
    const url = `http://127.0.0.1:${upstream.port}/repos/acme/api/issues?state=all`;
    expect(got).toMatchObject({
      operationId: 'op-1',
      attemptId: 'at-1',
      result: 'match',
      matches: 1,
      remoteRefs: ['https://gh/acme/api/issues/2'],
      status: 200,
      error: null,
      endpoint: `GET ${url}`,
      queryFingerprint: sha256Ref(
        canonicalJson({ method: 'GET', url, match: [{ remote: '$.title', value: 'Slow build' }] }),
      ),
    });
    expect(got.durationMs).toBeGreaterThan(0);
    expect(Date.parse(got.startedAt)).not.toBeNaN();
    expect(upstream.requests).toHaveLength(1);
  });

  it('answers none for an empty list and for a list without the item', async () => {
    answer = reply(200, []);
    expect(await lookup('gh.create_issue', issue('Slow build'))).toMatchObject({
      result: 'none',
      matches: 0,
      remoteRefs: [],
      status: 200,
      error: null,
    });
    answer = reply(200, ISSUES);
    expect(await lookup('gh.create_issue', issue('Never filed'))).toMatchObject({
      result: 'none',
      matches: 0,
      error: null,
    });
  });

  it('answers multiple with every matching reference when the effect exists twice', async () => {
    answer = reply(200, ISSUES);
    const got = await lookup('gh.create_issue', issue('Crash on start'));
    expect(got).toMatchObject({
      result: 'multiple',
      matches: 2,
      remoteRefs: ['https://gh/acme/api/issues/1', 'https://gh/acme/api/issues/3'],
      error: null,
    });
  });

  it('sends the agent’s credentials but not its idempotency key nor its body headers', async () => {
    await lookup('gh.create_issue', {
      ...issue('Slow build'),
      headers: {
        authorization: 'Bearer agent-token',
        'idempotency-key': 'op-key-1',
        'x-trace': 't-1',
        expect: '100-continue',
      },
    });
    expect(upstream.requests).toHaveLength(1);
    const seen = upstream.requests[0]!;
    expect(seen.method).toBe('GET');
    expect(seen.headers['authorization']).toBe('Bearer agent-token');
    expect(seen.headers['x-trace']).toBe('t-1');
    expect(seen.headers['accept']).toBe('application/json');
    expect(seen.headers['host']).toBe(`127.0.0.1:${upstream.port}`);
    expect(seen.headers['idempotency-key']).toBeUndefined();
    expect(seen.headers['content-type']).toBeUndefined();
    expect(seen.headers['expect']).toBeUndefined();
    expect(seen.body.length).toBe(0);
  });

  it('never records the credential it used', async () => {
    answer = reply(200, ISSUES);
    const got = await lookup('gh.create_issue', {
      ...issue('Slow build'),
      headers: { authorization: 'Bearer agent-token' },
    });
    expect(JSON.stringify(got)).not.toContain('agent-token');
  });

  it('is inconclusive on a 5xx status', async () => {
    answer = reply(503, { message: 'unavailable' });
    expect(await lookup('gh.create_issue', issue('Slow build'))).toMatchObject({
      result: 'inconclusive',
      matches: 0,
      remoteRefs: [],
      status: 503,
      error: 'status 503',
    });
  });

  it('is inconclusive when the connection is refused', async () => {
    const closed = await startUpstream();
    const port = closed.port;
    await closed.close();
    const got = await lookup('gh.create_issue', { ...issue('Slow build'), port });
    expect(got).toMatchObject({ result: 'inconclusive', matches: 0, status: null });
    expect(got.error).toMatch(/ECONNREFUSED/);
  });

  it('is inconclusive when the lookup times out', async () => {
    answer = neverAnswer();
    const got = await lookup('gh.create_issue', issue('Slow build'), client.send, 200);
    expect(got).toMatchObject({ result: 'inconclusive', status: null, error: 'deadline_exceeded' });
  });

  it('is inconclusive when the response is not JSON', async () => {
    answer = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' }).end('<html>login</html>');
    };
    expect(await lookup('gh.create_issue', issue('Slow build'))).toMatchObject({
      result: 'inconclusive',
      status: 200,
      error: 'response is not JSON',
    });
  });

  it('is inconclusive, not none, when the response is an object instead of the list', async () => {
    // `$[*]` over an object would list its member values: "Bad credentials" is no issue.
    answer = reply(200, { message: 'Bad credentials' });
    expect(await lookup('gh.create_issue', issue('Slow build'))).toMatchObject({
      result: 'inconclusive',
      matches: 0,
      status: 200,
      error: 'items path matched no list',
    });
  });

  it('is inconclusive, not none, when the items path matches nothing', async () => {
    answer = reply(200, { error: 'rate limited' });
    expect(await lookup('hook.send', hook('s'))).toMatchObject({
      result: 'inconclusive',
      status: 200,
      error: 'items path matched nothing',
    });
  });

  it('sends nothing when an argument to match on is absent', async () => {
    const got = await lookup('gh.create_issue', { ...issue('x'), body: { body: 'no title' } });
    expect(got).toMatchObject({
      result: 'inconclusive',
      matches: 0,
      status: null,
      error: 'argument $.body.title absent',
    });
    expect(upstream.requests).toHaveLength(0);
  });

  it('sends nothing when a path capture is absent', async () => {
    const got = await lookup('gh.create_issue', { ...issue('Slow build'), params: { owner: 'acme' } });
    expect(got).toMatchObject({ result: 'inconclusive', status: null, error: 'path capture {repo} absent' });
    expect(upstream.requests).toHaveLength(0);
  });

  it('keeps the template’s query string and encodes path captures', async () => {
    await lookup('gh.create_issue', {
      path: '/repos/a%20b%2Fc/api/issues',
      params: { owner: 'a b/c', repo: 'api' },
      body: { title: 'Slow build' },
    });
    expect(upstream.requests.map((r) => r.url)).toEqual(['/repos/a%20b%2Fc/api/issues?state=all']);
  });

  it('writes a secret path capture as {name} in the endpoint, matches on several fields', async () => {
    answer = reply(200, {
      data: [
        { id: 41, message: 'deployed', meta: { kind: 'info' } },
        { id: 42, message: 'deployed', meta: { kind: 'alert' } },
        { message: 'deployed', meta: { kind: 'alert' } },
      ],
    });
    const got = await lookup('hook.send', hook('s3cr3t-token'));
    expect(upstream.requests.map((r) => r.url)).toEqual(['/hooks/ops/s3cr3t-token/deliveries']);
    expect(got).toMatchObject({
      endpoint: `GET http://127.0.0.1:${upstream.port}/hooks/ops/{secret}/deliveries`,
      result: 'multiple',
      matches: 2,
      remoteRefs: ['42', null],
    });
    expect(JSON.stringify(got)).not.toContain('s3cr3t');
  });

  it('answers none for an empty nested list', async () => {
    answer = reply(200, { data: [] });
    const got = await lookup('hook.send', hook('s'));
    expect(got).toMatchObject({ result: 'none', matches: 0, error: null });
  });

  it('refuses a tool without a reconcile lookup', async () => {
    await expect(lookup('plain.create', { path: '/plain', params: {}, body: {} })).rejects.toThrow(
      /plain\.create/,
    );
  });
});
