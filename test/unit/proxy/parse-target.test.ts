import { describe, expect, it } from 'vitest';
import { parseAbsoluteTarget, parseAuthority, parseTunnelTarget } from '../../../src/proxy/parse-target.js';

describe('parseAbsoluteTarget', () => {
  it('parses an absolute-form http URL, keeping the path exactly as sent', () => {
    expect(parseAbsoluteTarget('http://API.example.com:8080/a/../b%2F?x=1&y')).toEqual({
      ok: true,
      value: { scheme: 'http', host: 'api.example.com', port: 8080, pathAndQuery: '/a/../b%2F?x=1&y' },
    });
  });

  it('uses default ports, including an explicit :80', () => {
    expect(parseAbsoluteTarget('http://example.com/')).toMatchObject({ value: { port: 80 } });
    expect(parseAbsoluteTarget('http://example.com:80/')).toMatchObject({ value: { port: 80 } });
    expect(parseAbsoluteTarget('HTTPS://example.com/')).toMatchObject({
      value: { scheme: 'https', port: 443 },
    });
  });

  it('gives "/" for an empty path and drops a fragment', () => {
    expect(parseAbsoluteTarget('http://example.com')).toMatchObject({ value: { pathAndQuery: '/' } });
    expect(parseAbsoluteTarget('http://example.com?q=1')).toMatchObject({ value: { pathAndQuery: '/?q=1' } });
    expect(parseAbsoluteTarget('http://example.com/p#f')).toMatchObject({ value: { pathAndQuery: '/p' } });
  });

  it('accepts IPv6 literals', () => {
    expect(parseAbsoluteTarget('http://[::1]:3000/x')).toMatchObject({
      value: { host: '[::1]', port: 3000 },
    });
  });

  it.each([
    ['/origin-form'],
    ['*'],
    ['ftp://example.com/file'],
    ['http:///nohost'],
    ['http://user:pass@example.com/'],
    ['http://example.com:0/'],
    ['http://example.com:99999/'],
    ['http://exa mple.com/'],
  ])('refuses %s', (target) => {
    expect(parseAbsoluteTarget(target).ok).toBe(false);
  });
});

describe('parseAuthority', () => {
  it('answers an authority seen before the same, per default port', () => {
    const once = parseAuthority('Example.COM', 80);
    expect(parseAuthority('Example.COM', 80)).toEqual(once);
    expect(once).toEqual({ ok: true, value: { host: 'example.com', port: 80 } });
    expect(parseAuthority('Example.COM', 443)).toEqual({
      ok: true,
      value: { host: 'example.com', port: 443 },
    });
    expect(parseAuthority('Example.COM', null).ok).toBe(false);
    expect(parseAuthority('Example.COM', null).ok).toBe(false);
  });

  it('parses CONNECT authority-form', () => {
    expect(parseAuthority('example.com:443', null)).toEqual({
      ok: true,
      value: { host: 'example.com', port: 443 },
    });
    expect(parseAuthority('[2001:db8::1]:8443', null)).toEqual({
      ok: true,
      value: { host: '[2001:db8::1]', port: 8443 },
    });
  });

  it('requires a port when there is no default', () => {
    expect(parseAuthority('example.com', null).ok).toBe(false);
    expect(parseAuthority('example.com:', null).ok).toBe(false);
  });

  it.each([[''], ['a@b:443'], ['example.com:443/path'], ['exa mple.com:443']])('refuses %j', (authority) => {
    expect(parseAuthority(authority, null).ok).toBe(false);
  });
});

describe('parseTunnelTarget', () => {
  const tunnel = { scheme: 'http', host: 'api.example.com', port: 8080 } as const;

  it('turns origin-form into the tunnel authority, whatever the spelling of a matching Host', () => {
    const expected = {
      ok: true,
      value: { scheme: 'http', host: 'api.example.com', port: 8080, pathAndQuery: '/a/../b?x=1' },
    };
    expect(parseTunnelTarget('/a/../b?x=1#frag', tunnel, 'API.example.com.:8080')).toEqual(expected);
    expect(parseTunnelTarget('/a/../b?x=1', tunnel, undefined)).toEqual(expected);
  });

  it('refuses a Host naming another host or port', () => {
    expect(parseTunnelTarget('/', tunnel, 'other.example.com:8080')).toMatchObject({ ok: false });
    expect(parseTunnelTarget('/', tunnel, 'api.example.com')).toMatchObject({
      ok: false,
      reason: expect.stringContaining('opened to api.example.com:8080'),
    });
    expect(parseTunnelTarget('/', tunnel, 'a@b')).toMatchObject({ ok: false });
  });

  it('defaults a Host without port to 80', () => {
    expect(parseTunnelTarget('/', { scheme: 'http', host: 'h', port: 80 }, 'h')).toMatchObject({ ok: true });
  });

  it('gives an intercepted TLS tunnel https targets, Host defaulting to 443, and no http ones', () => {
    const secure = { scheme: 'https', host: 'h', port: 443 } as const;
    expect(parseTunnelTarget('/p', secure, 'h')).toEqual({
      ok: true,
      value: { scheme: 'https', host: 'h', port: 443, pathAndQuery: '/p' },
    });
    expect(parseTunnelTarget('https://h/p', secure, undefined)).toMatchObject({ ok: true });
    expect(parseTunnelTarget('http://h:443/p', secure, undefined)).toMatchObject({ ok: false });
  });

  it('accepts absolute-form for the tunnel authority only, ignoring Host', () => {
    expect(parseTunnelTarget('http://api.example.com:8080/p', tunnel, 'ignored')).toMatchObject({
      ok: true,
      value: { host: 'api.example.com', port: 8080, pathAndQuery: '/p' },
    });
    expect(parseTunnelTarget('http://api.example.com/p', tunnel, undefined)).toMatchObject({ ok: false });
  });

  it('refuses asterisk-form and other shapes', () => {
    expect(parseTunnelTarget('*', tunnel, undefined)).toMatchObject({ ok: false });
    expect(parseTunnelTarget('p', tunnel, undefined)).toMatchObject({ ok: false });
  });
});
