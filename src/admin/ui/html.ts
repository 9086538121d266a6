/**
 * HTML building for the admin pages: every interpolated value is escaped unless it is already
 * `Html` (markup built here). Store values are untrusted, so nothing reaches a page unescaped.
 */

import { visibleText } from '../visible-text.js';

/** Markup that is safe to insert as is (built by `html`, or escaped text). */
export class Html {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
  toString(): string {
    return this.text;
  }
}

export type Fragment = Html | string | number | boolean | null | undefined | readonly Fragment[];

const ESCAPES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
  '`': '&#96;',
};

// C0 and C1 controls other than tab and newline are shown as U+FFFD: a page never carries an
// invisible control character from the store. (Lone surrogates become U+FFFD when encoded.)
// biome-ignore lint/suspicious/noControlCharactersInRegex: replacing control characters is the point
const UNPRINTABLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/**
 * Text as HTML: `& < > " ' \`` escaped (safe in element content and quoted attributes), controls
 * as U+FFFD and invisible format characters (bidi overrides…) as their code points.
 */
export function escapeHtml(text: string): string {
  return visibleText(text.replace(UNPRINTABLE, '\ufffd')).replace(/[&<>"'`]/g, (c) => ESCAPES[c]!);
}

/**
 * A form field's value, escaped for a quoted attribute and nothing else: it is posted back, so it
 * must round-trip exactly (escapeHtml would write an invisible character as its code point, and
 * the form would then name another scope or search for other text). Values are names and queries
 * the gate already refuses control characters in.
 */
export function formValue(text: string): Html {
  return new Html(text.replace(/[&<>"'`]/g, (c) => ESCAPES[c]!));
}

function render(value: Fragment): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof Html) return value.text;
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

/** Tagged template: literal parts are markup, interpolations are escaped (or inserted if `Html`). */
export function html(strings: TemplateStringsArray, ...values: readonly Fragment[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1]!;
  return new Html(out);
}

/** The fragments one after another, escaped where they are text. */
export function join(parts: readonly Fragment[], separator: Fragment = ''): Html {
  return new Html(
    parts
      .filter((p) => p !== null && p !== undefined && p !== false)
      .map(render)
      .join(render(separator)),
  );
}

/** Compact JSON of key values (strings quoted, so `"1"` and `1` differ), `-` when there are none. */
export function keyText(values: readonly unknown[] | null): string {
  if (values === null) return '-';
  try {
    return JSON.stringify(values);
  } catch {
    return '[unprintable]';
  }
}

/** At most `max` characters, `…` marking a cut. */
export function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
