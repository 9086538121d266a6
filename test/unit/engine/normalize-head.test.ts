import { describe, expect, it } from 'vitest';
import { stripHopByHop } from '../../../src/engine/hop-by-hop.js';
import {
  formatAuthority,
  MAX_CONTEXT_VALUE_LENGTH,
  normalizeHead,
  normalizeHost,
  normalizePath,
  type RawRequestHead,
  UNREADABLE_OPERATION_CLAIM,
} from '../../../src/engine/normalize-head.js';
import { toHeaderMap } from '../../../src/undici/dispatch-head.js';

function raw(overrides: Partial<RawRequestHead> = {}): RawRequestHead {
  return {
    scheme: 'http',
    method: 'post',
    host: 'API.Example.COM',
    port: 80,
    pathAndQuery: '/v1/items?b=2&a=1',
    headers: {},
    ...overrides,
  };
}

describe('normalizeHead', () => {
  it('upper-cases the method, lower-cases the host and splits path and query', () => {
    const head = normalizeHead(raw());
    expect(head).toMatchObject({ scheme: 'http', method: 'POST', host: 'api.example.com', port: 80 });
    expect(head.path).toBe('/v1/items');
    expect(head.query).toBe('b=2&a=1');
  });

  it('strips IPv6 brackets', () => {
    expect(normalizeHead(raw({ host: '[::1]' })).host).toBe('::1');
    expect(normalizeHead(raw({ host: '[FE80::1]' })).host).toBe('fe80::1');
  });

  it('gives "/" for an empty path and drops a fragment', () => {
    expect(normalizeHead(raw({ pathAndQuery: '' }))).toMatchObject({ path: '/', query: '' });
    expect(normalizeHead(raw({ pathAndQuery: '?q=1' }))).toMatchObject({ path: '/', query: 'q=1' });
    expect(normalizeHead(raw({ pathAndQuery: '/p?q=1#frag' }))).toMatchObject({ path: '/p', query: 'q=1' });
    expect(normalizeHead(raw({ pathAndQuery: '/p?' }))).toMatchObject({ path: '/p', query: '' });
  });

  it('normalizes the path (RFC 3986 §6.2.2) and keeps the query as sent', () => {
    expect(normalizeHead(raw({ pathAndQuery: '/repos/a/b/%69ssues?q=%7e' }))).toMatchObject({
      path: '/repos/a/b/issues',
      query: 'q=%7e',
    });
    expect(normalizeHead(raw({ pathAndQuery: '/a/../b/%7E?x' })).path).toBe('/b/~');
  });

  it('strips one trailing dot from the host', () => {
    expect(normalizeHead(raw({ host: 'API.GitHub.com.' })).host).toBe('api.github.com');
  });

  it('removes hop-by-hop headers, Host, Proxy-* and every header named in Connection', () => {
    const head = normalizeHead(
      raw({
        headers: {
          host: 'api.example.com',
          connection: 'keep-alive, X-Hop-One,x-hop-two',
          'proxy-connection': 'X-Hop-Three',
          'keep-alive': 'timeout=5',
          te: 'trailers',
          trailer: 'x-checksum',
          'transfer-encoding': 'chunked',
          upgrade: 'h2c',
          'proxy-authorization': 'Basic c2VjcmV0',
          'proxy-authenticate': 'Basic',
          'proxy-foo': 'bar',
          'x-hop-one': '1',
          'x-hop-two': '2',
          'x-hop-three': '3',
          'content-type': 'application/json',
          'content-length': '12',
          authorization: 'Bearer upstream-token',
          'set-cookie': ['a=1', 'b=2'],
          'x-absent': undefined,
        },
      }),
    );
    expect(head.headers).toEqual({
      'content-type': 'application/json',
      'content-length': '12',
      authorization: 'Bearer upstream-token',
      'set-cookie': ['a=1', 'b=2'],
    });
  });

  it('reads the Effectgate-* context and removes every effectgate-* header', () => {
    const head = normalizeHead(
      raw({
        headers: {
          'effectgate-run': ' run-1 ',
          'effectgate-step': '7',
          'effectgate-operation': 'op-9',
          'effectgate-worker': 'w-2',
          'effectgate-agent-version': '1.4.0',
          'effectgate-retry-reason': 'rate_limited',
          'effectgate-unknown': 'x',
          'x-kept': 'yes',
        },
      }),
    );
    expect(head.context).toEqual({
      run: 'run-1',
      step: '7',
      operation: 'op-9',
      worker: 'w-2',
      agentVersion: '1.4.0',
      retryReason: 'rate_limited',
    });
    expect(head.headers).toEqual({ 'x-kept': 'yes' });
  });

  it('ignores context values that are empty, too long or contain control characters', () => {
    const head = normalizeHead(
      raw({
        headers: {
          'effectgate-run': 'x'.repeat(MAX_CONTEXT_VALUE_LENGTH + 1),
          'effectgate-step': 'a\u0001b',
          'effectgate-operation': '   ',
          'effectgate-worker': 'tab\there',
          'effectgate-agent-version': 'x'.repeat(MAX_CONTEXT_VALUE_LENGTH),
        },
      }),
    );
    expect(head.context).toEqual({
      run: null,
      step: null,
      operation: null,
      worker: null,
      agentVersion: 'x'.repeat(MAX_CONTEXT_VALUE_LENGTH),
      retryReason: null,
    });
    expect(head.headers).toEqual({});
  });

  it('takes the first of repeated context values', () => {
    const head = normalizeHead(raw({ headers: { 'effectgate-run': ['r1', 'r2'] } }));
    expect(head.context.run).toBe('r1');
  });

  it('gives an all-null context when no header is present', () => {
    expect(normalizeHead(raw()).context).toEqual({
      run: null,
      step: null,
      operation: null,
      worker: null,
      agentVersion: null,
      retryReason: null,
    });
  });

  it('does not mutate its input', () => {
    const headers = { connection: 'x-a', 'x-a': '1', 'effectgate-run': 'r' };
    normalizeHead(raw({ headers }));
    expect(headers).toEqual({ connection: 'x-a', 'x-a': '1', 'effectgate-run': 'r' });
  });
});

describe('normalizePath', () => {
  it.each([
    ['/repos/a/b/%69ssues', '/repos/a/b/issues'],
    ['/%41%5a%61%7a%30%39%2D%2E%5F%7E', '/AZaz09-._~'],
    ['/%7e', '/~'],
    ['/a%2Fb', '/a%2Fb'],
    ['/a%2fb', '/a%2Fb'],
    ['/caf%c3%a9', '/caf%C3%A9'],
    ['/%zz/%4', '/%zz/%4'],
    ['/./', '/'],
    ['/a/./b', '/a/b'],
    ['/a/../b', '/b'],
    ['/a/b/..', '/a/'],
    ['/a/b/.', '/a/b/'],
    ['/../../x', '/x'],
    ['/..', '/'],
    ['/a//../b', '/a/b'],
    ['/a/%2e%2E/b', '/b'],
    ['/a/.b/..c/...', '/a/.b/..c/...'],
    ['/a%2F..%2Fb', '/a%2F..%2Fb'],
    ['/a b/+;=,', '/a b/+;=,'],
    ['/', '/'],
  ])('%s → %s', (input, expected) => {
    expect(normalizePath(input)).toBe(expected);
  });
});

describe('normalizeHost', () => {
  it('lower-cases, unbrackets IPv6 and strips one trailing dot', () => {
    expect(normalizeHost('API.github.com.')).toBe('api.github.com');
    expect(normalizeHost('api.github.com')).toBe('api.github.com');
    expect(normalizeHost('[::1]')).toBe('::1');
    expect(normalizeHost('.')).toBe('.');
  });
});

describe('formatAuthority', () => {
  it('brackets IPv6 and leaves out the default port', () => {
    expect(formatAuthority('::1', 8080)).toBe('[::1]:8080');
    expect(formatAuthority('[::1]', 8080)).toBe('[::1]:8080');
    expect(formatAuthority('example.com', 80, 80)).toBe('example.com');
    expect(formatAuthority('::1', 443, 443)).toBe('[::1]');
    expect(formatAuthority('example.com', 8443, 443)).toBe('example.com:8443');
  });
});

describe('stripHopByHop', () => {
  it('removes hop-by-hop response headers and those named in Connection, keeps the rest', () => {
    expect(
      stripHopByHop({
        connection: 'close, X-Upstream-Hop',
        'keep-alive': 'timeout=5',
        'transfer-encoding': 'chunked',
        trailer: 'x-digest',
        upgrade: 'websocket',
        'proxy-authenticate': 'Basic',
        'x-upstream-hop': 'secret',
        'content-type': 'text/plain',
        'set-cookie': ['a=1', 'b=2'],
        'x-undefined': undefined,
      }),
    ).toEqual({ 'content-type': 'text/plain', 'set-cookie': ['a=1', 'b=2'] });
  });

  it('handles a Connection header given as an array', () => {
    expect(stripHopByHop({ connection: ['x-a', 'x-b'], 'x-a': '1', 'x-b': '2', 'x-c': '3' })).toEqual({
      'x-c': '3',
    });
  });
});

describe('normalizeHead and scope', () => {
  it('never sets a scope, whatever the headers say', () => {
    const head = normalizeHead({
      scheme: 'http',
      method: 'POST',
      host: 'api.example.test',
      port: 80,
      pathAndQuery: '/x',
      headers: {
        scope: 'evil',
        'effectgate-scope': 'evil',
        'effectgate-tenant': 'evil',
        'proxy-authorization': 'Basic ZXZpbDpldmls',
      },
    });
    expect('scope' in head).toBe(false);
    expect(head.headers['proxy-authorization']).toBeUndefined();
  });
});

describe('normalizeHead and a delegation claim (Effectgate-Operation)', () => {
  const base = {
    scheme: 'https' as const,
    method: 'POST',
    host: 'api.github.com',
    port: 443,
    pathAndQuery: '/x',
  };
  const a = '0190aaaa-0000-7000-8000-00000000000a';
  const b = '0190aaaa-0000-7000-8000-00000000000b';
  const claim = (headers: Readonly<Record<string, string | string[] | undefined>>): string | null =>
    normalizeHead({ ...base, headers: headers as Record<string, string | string[]> }).context.operation;

  it('reads one id, trimmed', () => {
    expect(claim({ 'Effectgate-Operation': ` ${a} ` })).toBe(a);
    expect(claim({})).toBeNull();
    // A blank header claims nothing (templated clients send one).
    expect(claim({ 'effectgate-operation': ' ' })).toBeNull();
    expect(claim({ 'effectgate-operation': ['', a] })).toBe(a);
  });

  it('never drops a claim it cannot read: repeated (any spelling, joined or not), too long, control characters', () => {
    for (const headers of [
      { 'effectgate-operation': `${a}, ${b}` },
      { 'effectgate-operation': [a, b] },
      { 'Effectgate-Operation': a, 'effectgate-operation': b },
      { 'effectgate-operation': `${a}${' '.repeat(170)}x` },
      { 'effectgate-operation': `${a}\tretry` },
    ]) {
      expect(claim(headers), JSON.stringify(headers)).toBe(UNREADABLE_OPERATION_CLAIM);
    }
  });

  it('reads a repeated header the same through the undici interceptor as through the proxy', () => {
    const viaProxy = claim({ 'effectgate-operation': `${a}, ${b}` });
    const viaUndici = claim(
      toHeaderMap([
        ['Effectgate-Operation', a],
        ['Effectgate-Operation', b],
      ] as never),
    );
    expect(viaUndici).toBe(viaProxy);
  });
});
