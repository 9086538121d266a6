/**
 * Where each interpolation of an `html` template lands, read from the template's literal parts
 * (the markup the code wrote) with the HTML tokenizer's states that matter for escaping: element
 * text, inside a tag, a quoted attribute value, the raw text of a <textarea>/<title> (RCDATA) or
 * a <style>/<script> (RAWTEXT), a comment, a declaration. The interpolated values are never read
 * here: they cannot move the state, so a value can never choose how it is escaped.
 */

export type HoleContext =
  | { readonly kind: 'text' }
  /** Between a tag's name and its `>`, where attributes are written, or as an unquoted value. */
  | { readonly kind: 'tag' }
  | { readonly kind: 'attribute'; readonly name: string; readonly atStart: boolean }
  | { readonly kind: 'rcdata' | 'rawtext'; readonly element: string }
  | { readonly kind: 'comment' | 'declaration' };

export interface TemplateContexts {
  /**
   * Where the template starts: `tag` for attributes added to a tag (` id="${…}"`: blank, then a
   * name and `=` and a quote), else `text`.
   */
  readonly start: 'text' | 'tag';
  /** One per interpolation, in order. */
  readonly holes: readonly HoleContext[];
  /** Where the template ends; anything but where it started leaves a tag, quote or element open. */
  readonly end: HoleContext['kind'];
}

/** A template that adds attributes to a tag it is interpolated in. */
const ATTRIBUTES = /^\s+[A-Za-z][\w-]*=["']/;

/** Elements whose content is text up to their end tag (the HTML spec's RCDATA and RAWTEXT). */
const RCDATA = new Set(['textarea', 'title']);
const RAWTEXT = new Set(['style', 'script', 'xmp', 'iframe', 'noembed', 'noframes', 'noscript']);

type State =
  | { kind: 'text' }
  | { kind: 'tag'; element: string; end: boolean; attribute: string | null; afterEquals: boolean }
  | { kind: 'attribute'; element: string; name: string; quote: '"' | "'"; atStart: boolean }
  | { kind: 'unquoted'; element: string }
  | { kind: 'rcdata' | 'rawtext'; element: string }
  | { kind: 'comment' | 'declaration' };

const cache = new WeakMap<TemplateStringsArray, TemplateContexts>();

/** The contexts of a template's interpolations (computed once per template: it never changes). */
export function templateContexts(strings: TemplateStringsArray): TemplateContexts {
  const known = cache.get(strings);
  if (known !== undefined) return known;
  const start = ATTRIBUTES.test(strings[0]!) ? 'tag' : 'text';
  let state: State =
    start === 'tag'
      ? { kind: 'tag', element: '', end: false, attribute: null, afterEquals: false }
      : { kind: 'text' };
  const holes: HoleContext[] = [];
  for (let i = 0; i < strings.length; i++) {
    if (i > 0) {
      holes.push(holeContext(state));
      if (state.kind === 'attribute') state.atStart = false;
    }
    state = scan(strings[i]!, state);
  }
  const contexts = { start, holes, end: holeContext(state).kind } as const;
  cache.set(strings, contexts);
  return contexts;
}

function holeContext(state: State): HoleContext {
  switch (state.kind) {
    case 'text':
    case 'comment':
    case 'declaration':
      return { kind: state.kind };
    case 'tag':
    case 'unquoted':
      return { kind: 'tag' };
    case 'attribute':
      return { kind: 'attribute', name: state.name, atStart: state.atStart };
    case 'rcdata':
    case 'rawtext':
      return { kind: state.kind, element: state.element };
  }
}

const NAME = /^[A-Za-z][^\s/>]*/;

/** The state after `literal`, starting in `state`. */
function scan(literal: string, start: State): State {
  let state = start;
  let i = 0;
  while (i < literal.length) {
    const c = literal[i]!;
    switch (state.kind) {
      case 'text': {
        if (c !== '<') {
          i++;
          break;
        }
        const rest = literal.slice(i + 1);
        if (rest.startsWith('!--')) {
          state = { kind: 'comment' };
          i += 4;
        } else if (rest.startsWith('!') || rest.startsWith('?')) {
          state = { kind: 'declaration' };
          i += 2;
        } else if (rest === '' || rest === '/') {
          // A value right after `<` or `</` would name the element: it lands in the tag.
          state = { kind: 'tag', element: '', end: rest === '/', attribute: null, afterEquals: false };
          i = literal.length;
        } else {
          const end = rest.startsWith('/');
          const name = NAME.exec(end ? rest.slice(1) : rest)?.[0];
          if (name === undefined) {
            i++; // a lone `<` is text
          } else {
            state = { kind: 'tag', element: name.toLowerCase(), end, attribute: null, afterEquals: false };
            i += 1 + (end ? 1 : 0) + name.length;
          }
        }
        break;
      }
      case 'tag': {
        if (c === '>') {
          state = afterTag(state);
        } else if (/\s/.test(c) || c === '/') {
          if (!state.afterEquals) state.attribute = null;
        } else if (c === '=' && state.attribute !== null) {
          state.afterEquals = true;
        } else if (state.afterEquals && (c === '"' || c === "'")) {
          state = {
            kind: 'attribute',
            element: state.element,
            name: state.attribute!,
            quote: c,
            atStart: true,
          };
        } else if (state.afterEquals) {
          state = { kind: 'unquoted', element: state.element };
          continue;
        } else {
          state.attribute = (state.attribute ?? '') + c.toLowerCase();
        }
        i++;
        break;
      }
      case 'attribute':
        if (c === state.quote) {
          state = { kind: 'tag', element: state.element, end: false, attribute: null, afterEquals: false };
        } else {
          state.atStart = false;
        }
        i++;
        break;
      case 'unquoted':
        // Only the code's own literal values get here (a value is refused in this state).
        if (c === '>') state = afterTag({ element: state.element, end: false });
        else if (/\s/.test(c))
          state = { kind: 'tag', element: state.element, end: false, attribute: null, afterEquals: false };
        i++;
        break;
      case 'rcdata':
      case 'rawtext': {
        const close = new RegExp(`</${state.element}[\\s/>]`, 'i').exec(literal.slice(i));
        if (close === null) return state;
        i += close.index + 2 + state.element.length;
        state = { kind: 'tag', element: state.element, end: true, attribute: null, afterEquals: false };
        break;
      }
      case 'comment': {
        const close = literal.indexOf('-->', i);
        if (close === -1) return state;
        state = { kind: 'text' };
        i = close + 3;
        break;
      }
      case 'declaration': {
        const close = literal.indexOf('>', i);
        if (close === -1) return state;
        state = { kind: 'text' };
        i = close + 1;
        break;
      }
    }
  }
  return state;
}

function afterTag(tag: { element: string; end: boolean }): State {
  if (tag.end) return { kind: 'text' };
  if (RCDATA.has(tag.element)) return { kind: 'rcdata', element: tag.element };
  if (RAWTEXT.has(tag.element)) return { kind: 'rawtext', element: tag.element };
  return { kind: 'text' };
}
