/**
 * Destination references (an attempt's `destination_ref`, the refs of a lookup or an operator's
 * resolution) as links an operator can follow to check the effect at the destination. They come
 * from a destination's response or a form, so only a plain http(s) URL becomes a link: any other
 * scheme (`javascript:`, `data:`, `file:`…) or anything the URL parser would have to repair stays
 * text, and the link never tells the destination which page it came from.
 */
import { html, type SafeHtml } from './html.js';

/** The whole text is one absolute http(s) URL with a host: no blank, control, or missing slashes. */
const HTTP_URL = /^https?:\/\/[^\s/?#\\]+[^\s\\]*$/i;

/** The URL to link to, or `null` when `ref` must stay text. */
export function httpUrl(ref: string): string | null {
  if (!HTTP_URL.test(ref)) return null;
  let url: URL;
  try {
    url = new URL(ref);
  } catch {
    return null;
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') return null;
  // `https://github.com@evil.example/…` reads as one host and goes to another.
  if (url.username !== '' || url.password !== '') return null;
  // The parsed form: percent-encoded, so the href is exactly what the browser will request.
  return url.href;
}

/** A reference as a link when it is an http(s) URL (its text shown as given), else as code. */
export function refHtml(ref: unknown): SafeHtml {
  const text = ref === null || ref === undefined ? 'null' : String(ref);
  const href = httpUrl(text);
  return href === null
    ? html`<code>${text}</code>`
    : html`<a class="ref mono" href="${href}" rel="noopener noreferrer">${text}</a>`;
}
