/** From the admin UI's hostile review: a destination reference with userinfo reads as one host and links to another. */
import { describe, expect, it } from 'vitest';
import { httpUrl, refHtml } from '../../../../src/admin/ui/links.js';

describe('refHtml and userinfo', () => {
  it('does not link "https://github.com@evil.example/…" (its text names github.com, its href goes to evil.example)', () => {
    const ref = 'https://github.com@evil.example/acme/app/issues/77';
    expect(new URL(httpUrl(ref) ?? 'http://none.invalid').hostname).not.toBe('evil.example');
    expect(refHtml(ref).text).not.toContain('href=');
  });
});
