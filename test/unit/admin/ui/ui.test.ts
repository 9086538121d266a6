/**
 * The building blocks of the admin pages: escaping, same-origin return paths, session cookies and
 * CSRF tokens, and the key-value search syntax.
 */
import { describe, expect, it } from 'vitest';
import { sameSecret } from '../../../../src/admin/admin-auth.js';
import { parseKeyQuery } from '../../../../src/admin/index.js';
import { escapeHtml, html, join, SafeHtml } from '../../../../src/admin/ui/html.js';
import {
  cookieValue,
  csrfToken,
  endSession,
  newSession,
  SESSION_TTL_SECONDS,
  sessionCookie,
  verifyCsrf,
  verifySession,
} from '../../../../src/admin/ui/session.js';
import { PAGE_HEADERS, safeUiPath } from '../../../../src/admin/ui/ui-http.js';

const TOKEN = 'eg-unit-token-5d1c';

describe('escaping', () => {
  it('escapes the characters that matter in content and quoted attributes', () => {
    expect(escapeHtml(`<a href="x" title='y'>&\`</a>`)).toBe(
      '&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&#96;&lt;/a&gt;',
    );
  });

  it('shows control characters as U+FFFD, keeps tabs and newlines', () => {
    expect(escapeHtml('a\u0000b\u001bc\u009bd\te\nf')).toBe('a\ufffdb\ufffdc\ufffdd\te\nf');
  });

  it('escapes every interpolation of html`` except markup built with it', () => {
    const inner = html`<b>${'<i>'}</b>`;
    const out = html`<p title="${'"><script>'}">${inner}${['<x>', 1, null, undefined, false]}</p>`;
    expect(out).toBeInstanceOf(SafeHtml);
    expect(out.text).toBe('<p title="&quot;&gt;&lt;script&gt;"><b>&lt;i&gt;</b>&lt;x&gt;1</p>');
    expect(join(['<a>', html`<br>`], ', ').text).toBe('&lt;a&gt;, <br>');
  });
});

describe('safeUiPath: where a form may send the browser back to', () => {
  it.each([
    '/ui',
    '/ui/',
    '/ui/operations?state=unknown&key=a%2Cb',
    '/ui/operations/01a2-b3#approval-9f',
    '/ui/approvals?state=requested',
  ])('accepts %s', (path) => {
    expect(safeUiPath(path)).toBe(path);
  });

  it.each([
    '//evil.example/ui/',
    'https://evil.example/ui/',
    '/uix',
    '/api/operations',
    '/ui//evil.example',
    '/ui/../api/operations',
    '/ui/./x',
    '/ui/%2e%2e/api',
    '/ui/%2E./api',
    '/ui\\evil.example',
    '/ui/\\evil.example',
    '/ui/x\r\nset-cookie: a=b',
    '/ui/é',
    '/ui/ x',
    '',
    `/ui/${'a'.repeat(2001)}`,
  ])('refuses %j', (path) => {
    expect(safeUiPath(path)).toBeNull();
  });

  it('refuses absent values', () => {
    expect(safeUiPath(undefined)).toBeNull();
    expect(safeUiPath(null)).toBeNull();
  });
});

describe('sessions', () => {
  it('a new session verifies with its token, never holds the token, and not with another token', () => {
    const s = newSession(TOKEN);
    expect(s).not.toContain(TOKEN);
    expect(s).toMatch(/^[A-Za-z0-9_-]{22}\.\d+\.[A-Za-z0-9_-]{43}$/);
    expect(verifySession(s, TOKEN)).toBe(true);
    expect(verifySession(s, `${TOKEN}x`)).toBe(false);
    expect(newSession(TOKEN)).not.toBe(s);
  });

  it('refuses a tampered session, a forged expiry and an expired one', () => {
    const now = Date.now();
    const s = newSession(TOKEN, now);
    const [sid, exp, mac] = s.split('.') as [string, string, string];
    expect(verifySession(`${sid}.${Number(exp) + 1000}.${mac}`, TOKEN, now)).toBe(false);
    const flipped = `${sid}.${exp}.${mac.slice(0, -1)}${mac.endsWith('A') ? 'B' : 'A'}`;
    expect(verifySession(flipped, TOKEN, now)).toBe(false);
    expect(verifySession(`${sid.slice(0, -1)}x.${exp}.${mac}`, TOKEN, now)).toBe(false);
    expect(verifySession(s, TOKEN, now + SESSION_TTL_SECONDS * 1000 + 1000)).toBe(false);
    for (const bad of [undefined, '', 'x', `${s}.`, `${s} `, TOKEN])
      expect(verifySession(bad, TOKEN, now)).toBe(false);
  });

  it('a logged-out session no longer verifies', () => {
    const s = newSession(TOKEN);
    endSession(s);
    expect(verifySession(s, TOKEN)).toBe(false);
  });

  it('binds the CSRF token to the session', () => {
    const a = newSession(TOKEN);
    const b = newSession(TOKEN);
    const csrf = csrfToken(TOKEN, a);
    expect(csrf).not.toContain(TOKEN);
    expect(verifyCsrf(csrf, TOKEN, a)).toBe(true);
    expect(verifyCsrf(csrf, TOKEN, b)).toBe(false);
    expect(verifyCsrf(csrf, `${TOKEN}x`, a)).toBe(false);
    expect(verifyCsrf(undefined, TOKEN, a)).toBe(false);
    expect(verifyCsrf('', TOKEN, a)).toBe(false);
  });

  it('compares secrets whatever their lengths', () => {
    expect(sameSecret(TOKEN, TOKEN)).toBe(true);
    expect(sameSecret(TOKEN, TOKEN.slice(1))).toBe(false);
    expect(sameSecret('', TOKEN)).toBe(false);
  });

  it('sets HttpOnly, SameSite=Strict, Path=/ui, and Secure only over TLS', () => {
    expect(sessionCookie('v', false)).toBe(
      `eg_session=v; HttpOnly; SameSite=Strict; Path=/ui; Max-Age=${SESSION_TTL_SECONDS}`,
    );
    expect(sessionCookie('v', true)).toMatch(/; Secure$/);
    expect(sessionCookie(null, false)).toBe('eg_session=; HttpOnly; SameSite=Strict; Path=/ui; Max-Age=0');
  });

  it('reads one cookie from a Cookie header', () => {
    expect(cookieValue('a=1; eg_session=abc.1.x; b=2', 'eg_session')).toBe('abc.1.x');
    expect(cookieValue('xeg_session=1', 'eg_session')).toBeUndefined();
    expect(cookieValue(undefined, 'eg_session')).toBeUndefined();
  });
});

describe('page headers', () => {
  it('forbid script, framing, sniffing, referrers and caching', () => {
    expect(PAGE_HEADERS).toMatchObject({
      'content-security-policy':
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
      'cache-control': 'no-store',
    });
  });
});

describe('parseKeyQuery', () => {
  it('takes a JSON array as is', () => {
    expect(parseKeyQuery('["acme", 42, null, {"a": 1}]')).toEqual(['acme', 42, null, { a: 1 }]);
  });

  it('turns comma-separated text into strings', () => {
    expect(parseKeyQuery('acme, api , Disk full')).toEqual(['acme', 'api', 'Disk full']);
    expect(parseKeyQuery('42')).toEqual(['42']);
  });

  it('refuses JSON that is not an array', () => {
    expect(() => parseKeyQuery('[1,')).toThrow(/JSON array/);
    expect(() => parseKeyQuery('[')).toThrow(/JSON array/);
  });
});
