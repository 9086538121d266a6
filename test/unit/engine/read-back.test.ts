import { describe, expect, it } from 'vitest';
import { ReadBacks } from '../../../src/engine/read-back.js';
import type { GateRequestHead } from '../../../src/engine/types.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';

/** Which requests may be an agent's read-back of a tool's lookup (read-back.ts), decided without a store. */
function tools(reconcileMatch: string, key = '[$.path.owner, $.path.repo, $.body.title]') {
  return parsePolicyFiles([
    {
      file: 'p.yaml',
      text: `version: 1
tools:
  - id: t.create_issue
    match: { hosts: [api.example.test], method: POST, path: '/repos/{owner}/{repo}/issues' }
    effect: create
    dedupe: { key: ${key}, window: 1h }
    reconcile:
      method: GET
      path: /repos/{owner}/{repo}/issues?state=all
      items: $[*]
      match: { ${reconcileMatch} }
`,
    },
  ]).tools;
}

const head = (
  method: string,
  path: string,
  extra: { host?: string; query?: string; headers?: Record<string, string> } = {},
): GateRequestHead =>
  ({
    method,
    path,
    host: extra.host ?? 'api.example.test',
    port: 443,
    scheme: 'https',
    query: extra.query ?? 'state=all',
    headers: extra.headers ?? {},
  }) as unknown as GateRequestHead;

describe('ReadBacks.toolsFor', () => {
  const readBacks = new ReadBacks(tools('$.title: $.body.title'));

  it("matches the lookup's method, path shape (one segment per capture), query names and the tool's hosts", () => {
    expect(readBacks.toolsFor(head('GET', '/repos/acme/app/issues')).map((r) => r.tool.id)).toEqual([
      't.create_issue',
    ]);
    for (const [m, p] of [
      ['POST', '/repos/acme/app/issues'],
      ['GET', '/repos/acme/app/issues/7'],
      ['GET', '/repos/acme/app/x/issues'],
      ['GET', '/repos/acme/issues'],
    ] as const) {
      expect(readBacks.toolsFor(head(m, p)), `${m} ${p}`).toEqual([]);
    }
    // Anything else streams as before: another host, another query, an event stream.
    const path = '/repos/acme/app/issues';
    expect(readBacks.toolsFor(head('GET', path, { host: 'gitlab.example.org' }))).toEqual([]);
    expect(readBacks.toolsFor(head('GET', path, { query: 'state=all&page=2' }))).toEqual([]);
    expect(readBacks.toolsFor(head('GET', path, { query: '' }))).toEqual([]);
    expect(readBacks.toolsFor(head('GET', path, { headers: { accept: 'text/event-stream' } }))).toEqual([]);
  });

  it('leaves out a tool whose match arguments or captures are not key paths (the store keeps only key values)', () => {
    expect(
      new ReadBacks(tools('$.title: $.body.name')).toolsFor(head('GET', '/repos/acme/app/issues')),
    ).toEqual([]);
    expect(
      new ReadBacks(tools('$.title: $.body.title', '[$.path.owner, $.body.title]')).toolsFor(
        head('GET', '/repos/acme/app/issues'),
      ),
    ).toEqual([]);
  });
});
