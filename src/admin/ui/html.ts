/**
 * HTML building for the admin pages, escaping by construction: markup comes only from the literal
 * parts of an `html` template, and every interpolation is escaped for where it lands
 * (html-contexts.ts) unless it is a `SafeHtml` this module made. Store values are untrusted (an
 * agent or a destination wrote them), so nothing reaches a page unescaped; a value that would land
 * where escaping cannot protect it (inside a tag, an unquoted attribute, a <style>, a comment) or
 * markup that could close what holds it (a <textarea>, a quoted attribute) is a programming error,
 * thrown at once (the page is then a 500), never written.
 */

import { visibleText } from '../visible-text.js';
import { type HoleContext, templateContexts } from './html-contexts.js';

/** Only this module holds it: a `SafeHtml` cannot be made anywhere else. */
const MINT: unique symbol = Symbol('SafeHtml');
/** Every `SafeHtml` this module made (an object built on its prototype elsewhere is not one). */
const MINTED = new WeakSet<object>();

/**
 * Markup that is safe to insert as is: built by `html`/`join`, a `formValue`, or a constant the
 * code calls raw (`unsafeRawHtml`). `attribute` marks an escaped attribute value (a `formValue`):
 * it may fill a quoted attribute, where markup may not.
 */
export class SafeHtml {
  readonly text: string;
  readonly kind: 'markup' | 'attribute';
  constructor(mint: typeof MINT, text: string, kind: 'markup' | 'attribute' = 'markup') {
    if (mint !== MINT) throw new TypeError('SafeHtml is made only by html.ts (html``, join, formValue)');
    this.text = text;
    this.kind = kind;
    Object.freeze(this);
    MINTED.add(this);
  }
  toString(): string {
    return this.text;
  }
}

function isSafeHtml(value: unknown): value is SafeHtml {
  return typeof value === 'object' && value !== null && MINTED.has(value);
}

export type Fragment = SafeHtml | string | number | boolean | null | undefined | readonly Fragment[];

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
 * Text as HTML: `& < > " ' \`` escaped (safe in element content, quoted attributes and the text of
 * a <textarea> or <title>), controls as U+FFFD and invisible format characters (bidi overrides…)
 * as their code points.
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
export function formValue(text: string): SafeHtml {
  return new SafeHtml(
    MINT,
    text.replace(/[&<>"'`]/g, (c) => ESCAPES[c]!),
    'attribute',
  );
}

/**
 * A constant the code vouches for, inserted as is (the pages' CSS in their <style>). Never store
 * data: nothing in it is escaped. A <style> or <script> takes nothing else, and not this either
 * when it would close the element.
 */
export function unsafeRawHtml(constant: string): SafeHtml {
  return new SafeHtml(MINT, constant);
}

/** Attributes whose value is a URL the browser follows or posts to. */
const URL_ATTRIBUTES = new Set(['href', 'src', 'action', 'formaction', 'cite', 'poster', 'srcset']);
/**
 * How a URL attribute's value may start when a value (not the template) starts it: a same-origin
 * path, a query, a fragment, or an http(s) URL; never a `javascript:` or `data:` URL, never `//`.
 */
const SAFE_URL_START = /^(?:\/(?![/\\])|[?#]|https?:\/\/)/i;

function refuse(context: HoleContext, why: string): never {
  throw new TypeError(`html: ${why} (${context.kind})`);
}

/** An escaped attribute value, once its URL (when it starts one) is known to be harmless. */
function attributeText(escaped: string, context: HoleContext & { kind: 'attribute' }): string {
  // Escaping keeps letters, `/ ? # :` and the backslash, so the escaped text starts as the value does.
  if (context.atStart && URL_ATTRIBUTES.has(context.name) && !SAFE_URL_START.test(escaped))
    refuse(context, `the URL in ${context.name} must start as a path, a fragment or an http(s) URL`);
  return escaped;
}

function render(value: Fragment, context: HoleContext): string {
  if (value === null || value === undefined || value === false) return '';
  if (Array.isArray(value)) {
    if (context.kind !== 'attribute' || !context.atStart)
      return value.map((v: Fragment) => render(v, context)).join('');
    // The pieces start the value together: the URL check reads what they make.
    const later = { ...context, atStart: false };
    return attributeText(value.map((v: Fragment) => render(v, later)).join(''), context);
  }
  if (isSafeHtml(value)) {
    switch (context.kind) {
      case 'text':
      case 'tag':
        return value.text;
      case 'attribute':
        if (value.kind === 'attribute') return attributeText(value.text, context);
        return refuse(context, `markup inside the attribute value ${context.name} could close its quote`);
      case 'rcdata':
        if (value.kind === 'attribute') return value.text;
        return refuse(context, `markup inside a <${context.element}> could close it`);
      case 'rawtext':
        if (value.kind === 'markup' && !new RegExp(`</${context.element}`, 'i').test(value.text))
          return value.text;
        return refuse(context, `a <${context.element}> holds only a raw constant that does not close it`);
      case 'comment':
      case 'declaration':
        return refuse(context, `nothing may be interpolated in a ${context.kind}`);
    }
  }
  const text = String(value);
  switch (context.kind) {
    case 'text':
    case 'rcdata':
      return escapeHtml(text);
    case 'attribute':
      return attributeText(escapeHtml(text), context);
    case 'tag':
      if (text === '') return '';
      return refuse(context, 'text in a tag must be a quoted attribute value');
    case 'rawtext':
      return refuse(context, `text inside a <${context.element}> is never escaped`);
    case 'comment':
    case 'declaration':
      return refuse(context, `nothing may be interpolated in a ${context.kind}`);
  }
}

/**
 * Tagged template: the literal parts are markup; each interpolation is escaped for where it lands,
 * or inserted as is if it is `SafeHtml` and may go there. The template must close what it opens.
 */
export function html(strings: TemplateStringsArray, ...values: readonly Fragment[]): SafeHtml {
  const contexts = templateContexts(strings);
  if (contexts.end !== contexts.start)
    throw new TypeError(`html: the template leaves a ${contexts.end} unclosed: ${strings.join('…')}`);
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i], contexts.holes[i]!) + strings[i + 1]!;
  return new SafeHtml(MINT, out);
}

const TEXT: HoleContext = { kind: 'text' };

/** The fragments one after another, escaped where they are text (for element content). */
export function join(parts: readonly Fragment[], separator: Fragment = ''): SafeHtml {
  return new SafeHtml(
    MINT,
    parts
      .filter((p) => p !== null && p !== undefined && p !== false)
      .map((p) => render(p, TEXT))
      .join(render(separator, TEXT)),
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
