import { describe, expect, it } from 'vitest';
import { canonicalHost } from '../../../src/policy/canonical-host.js';
import { parseHostPattern } from '../../../src/policy/host-pattern.js';
import { Classifier, parsePolicyFiles } from '../../../src/policy/index.js';
import { lenientPath } from '../../../src/policy/lenient-match.js';
import { PathTemplate } from '../../../src/policy/path-template.js';

describe('canonicalHost', () => {
  it.each([
    ['127.0.0.1', '127.0.0.1'],
    ['127.1', '127.0.0.1'],
    ['0x7f.0.0.1', '127.0.0.1'],
    ['0177.0.0.1', '127.0.0.1'],
    ['2130706433', '127.0.0.1'],
    ['127.0.0.1.', '127.0.0.1'],
    ['[::ffff:127.0.0.1]', '127.0.0.1'],
    ['::FFFF:7F00:1', '127.0.0.1'],
    ['[0:0:0:0:0:0:0:1]', '::1'],
    ['2001:DB8::0:1', '2001:db8::1'],
    ['API.GitHub.com.', 'api.github.com'],
    ['cafe.bad', 'cafe.bad'],
  ])('%s → %s', (input, expected) => {
    expect(canonicalHost(input)).toBe(expected);
  });
});

describe('hosts entries take the canonical IP form', () => {
  it.each([
    ['::ffff:127.0.0.1', '127.0.0.1', null, '127.0.0.1'],
    ['[::ffff:7f00:1]:8443', '127.0.0.1', 8443, '127.0.0.1:8443'],
    ['[0:0::1]:8443', '::1', 8443, '[::1]:8443'],
    ['0x7f.1', '127.0.0.1', null, '127.0.0.1'],
    ['2130706433:80', '127.0.0.1', 80, '127.0.0.1:80'],
  ])('%s', (entry, host, port, text) => {
    expect(parseHostPattern(entry)).toMatchObject({ kind: 'exact', host, port, text });
  });
});

describe('lenientPath', () => {
  it.each([
    ['/a\\b', '/a/b', ['\\ read as /']],
    ['/a%5cb', '/a/b', ['\\ read as /']],
    ['/a%2Fb', '/a/b', ['%2F decoded to /']],
    ['/a;x=1/b;y', '/a/b', [';params dropped']],
    ['/a//b///', '/a/b/', ['// merged']],
    ['/a/x\\..\\b', '/a/b', ['\\ read as /', 'dot segments resolved']],
    ['/a/b', '/a/b', []],
  ])('%s → %s', (input, path, readings) => {
    expect(lenientPath(input)).toEqual({ path, readings });
  });

  it('folds case only in matchFolded', () => {
    const t = new PathTemplate('/Repos/{owner}/issues');
    expect(t.match('/repos/x/issues')).toBeNull();
    expect(t.matchFolded('/repos/x/ISSUES')).toEqual({ owner: 'x' });
  });
});

const classifier = new Classifier(
  parsePolicyFiles([
    {
      file: 'p.yaml',
      text: `
version: 1
tools:
  - id: t.create
    match: { hosts: [api.example.com, "localhost:18443"], method: POST, path: "/repos/{owner}/{repo}/issues" }
    effect: create
  - id: t.any_port
    match: { hosts: ["*.corp.example"], method: DELETE, path: "/items/{id}" }
    effect: destroy
    dedupe: { key: [$.path.id], window: 1h }
`,
    },
  ]),
);

describe('Classifier spellings', () => {
  it('governs interception by host and port', () => {
    expect(classifier.mayGovern('localhost', 18443)).toBe(true);
    expect(classifier.mayGovern('localhost', 18444)).toBe(false);
    expect(classifier.mayGovern('localhost')).toBe(true);
    expect(classifier.mayGovern('api.example.com', 8443)).toBe(true);
    expect(classifier.mayGovern('x.corp.example', 1)).toBe(true);
    expect(classifier.mayGovern('example.org', 443)).toBe(false);
  });

  it('explains a near miss with the readings that make it match', () => {
    const near = classifier.lenient({
      host: 'api.example.com',
      port: 443,
      method: 'POST',
      path: '/Repos/a/b\\Issues',
    });
    expect(near?.tool.id).toBe('t.create');
    expect(near?.explain()).toBe(
      'POST api.example.com,localhost:18443 /repos/{owner}/{repo}/issues, if read with: \\ read as /, case folded',
    );
  });

  it('finds no near miss for a strict match, another method, another port or another host', () => {
    const input = { host: 'api.example.com', port: 443, method: 'POST', path: '/repos/a/b/issues' };
    expect(classifier.lenient(input)).toBeNull();
    expect(classifier.lenient({ ...input, path: '/repos/a/b/pulls' })).toBeNull();
    expect(classifier.lenient({ ...input, method: 'GET', path: '/Repos/a/b/issues' })).toBeNull();
    expect(
      classifier.lenient({ ...input, host: 'localhost', port: 18444, path: '/Repos/a/b/issues' }),
    ).toBeNull();
    expect(classifier.lenient({ ...input, host: 'example.org', path: '/Repos/a/b/issues' })).toBeNull();
    expect(
      classifier.lenient({ ...input, host: 'x.corp.example', method: 'DELETE', path: '/Items/1' })?.tool.id,
    ).toBe('t.any_port');
  });

  it('spots a strict match whose captures a lenient server reads otherwise', () => {
    const input = { host: 'x.corp.example', port: 443, method: 'DELETE', path: '/items/1;v' };
    const strict = classifier.candidates(input);
    expect(strict).toHaveLength(1);
    expect(classifier.lenient(input, strict)?.readings).toEqual([
      ';params dropped',
      'captures read differently',
    ]);
    expect(classifier.lenient({ ...input, path: '/items/1' }, strict)).toBeNull();
    // %2F inside one capture is data (GitLab-style ids): the lenient reading matches no route.
    expect(classifier.lenient({ ...input, path: '/items/a%2Fb' }, strict)).toBeNull();
    // Rails reads `/items/7.json` as item 7 (format json): a key on the id cannot tell which.
    expect(classifier.lenient({ ...input, path: '/items/7.json' }, strict)?.readings).toEqual([
      'format suffix dropped',
      'captures read differently',
    ]);
  });

  it('reaches a route past a format suffix, and a route whose own last segment has a dot', () => {
    const input = { host: 'api.example.com', port: 443, method: 'POST', path: '/repos/a/b/issues.json' };
    expect(classifier.candidates(input)).toHaveLength(0);
    expect(classifier.lenient(input)?.readings).toEqual(['format suffix dropped']);
    expect(lenientPath('/api/chat.postMessage', false)).toEqual({
      path: '/api/chat.postMessage',
      readings: [],
    });
  });

  it('lists the exact names to resolve, without wildcards or IP literals', () => {
    expect([...classifier.exactNames].sort()).toEqual(['api.example.com', 'localhost']);
  });
});
