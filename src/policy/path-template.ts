type TemplateSegment =
  | { readonly literal: string; readonly folded: string; readonly capture: null }
  | { readonly literal: null; readonly folded: null; readonly capture: string };

const CAPTURE = /^\{([A-Za-z_][A-Za-z0-9_]*)\}$/;
const NO_PARAMS: Readonly<Record<string, string>> = Object.freeze(Object.create(null));

/**
 * A compiled `match.path` template such as `/repos/{owner}/{repo}/issues`: literal segments compare
 * exactly, `{name}` captures exactly one non-empty segment (percent-decoded).
 */
export class PathTemplate {
  readonly text: string;
  /** Capture names in order. */
  readonly captures: readonly string[];
  /** Captures replaced by `{}`: two templates with the same shape match the same paths. */
  readonly shape: string;
  readonly #segments: readonly TemplateSegment[];

  /** Throws a plain Error describing the first problem in `text`. */
  constructor(text: string) {
    if (!text.startsWith('/')) throw new Error('must start with /');
    if (/[?#]/.test(text)) throw new Error('must not contain a query or fragment (? or #)');
    if (/\s/.test(text)) throw new Error('must not contain whitespace');
    if (text.includes('//')) throw new Error('has an empty segment (//)');
    // "/a/" and "/a" are the same route: a request's trailing slash is ignored too.
    const body = text.length > 1 && text.endsWith('/') ? text.slice(1, -1) : text.slice(1);
    const parts = body === '' ? [] : body.split('/');
    const segments: TemplateSegment[] = [];
    const captures: string[] = [];
    for (const part of parts) {
      if (part === '') throw new Error('has an empty segment (//)');
      const m = CAPTURE.exec(part);
      if (m !== null) {
        const name = m[1]!;
        if (captures.includes(name)) throw new Error(`capture {${name}} is used twice`);
        captures.push(name);
        segments.push({ literal: null, folded: null, capture: name });
      } else if (/[{}]/.test(part)) {
        throw new Error(`segment ${JSON.stringify(part)}: a {name} capture must be a whole segment`);
      } else {
        segments.push({ literal: part, folded: part.toLowerCase(), capture: null });
      }
    }
    this.text = text;
    this.captures = Object.freeze(captures);
    this.shape = `/${segments.map((s) => (s.capture === null ? s.literal : '{}')).join('/')}`;
    this.#segments = Object.freeze(segments);
    Object.freeze(this);
  }

  /**
   * Matches a request path (no query string). Returns the captures, or `null`. Walks the string
   * with indexOf instead of split() so a miss allocates nothing.
   */
  match(path: string): Readonly<Record<string, string>> | null {
    return this.#match(path, false);
  }

  /**
   * As `match`, but literal segments compare case-insensitively: how a case-insensitive server
   * (IIS, many Windows-hosted and some Java routers) would read the path. Used only to tell a
   * near miss of a governed route, never to govern.
   */
  matchFolded(path: string): Readonly<Record<string, string>> | null {
    return this.#match(path, true);
  }

  #match(path: string, fold: boolean): Readonly<Record<string, string>> | null {
    if (path.charCodeAt(0) !== 47) return null;
    let end = path.length;
    if (end > 1 && path.charCodeAt(end - 1) === 47) end--;
    const segments = this.#segments;
    if (segments.length === 0) return end === 1 ? NO_PARAMS : null;
    // Two walks: the first compares the literals and the shape without allocating, so a miss
    // (most requests on a governed host miss most templates, and the near-miss check asks again)
    // decodes nothing; only a hit walks again to decode its captures.
    let pos = 1;
    for (const seg of segments) {
      if (pos > end) return null;
      let next = path.indexOf('/', pos);
      if (next === -1 || next > end) next = end;
      if (seg.capture === null) {
        if (next - pos !== seg.literal.length) return null;
        if (
          !path.startsWith(seg.literal, pos) &&
          (!fold || path.slice(pos, next).toLowerCase() !== seg.folded)
        )
          return null;
      } else if (next === pos) {
        return null;
      }
      pos = next + 1;
    }
    if (pos !== end + 1) return null;
    if (this.captures.length === 0) return NO_PARAMS;
    // Null prototype: a capture named like an Object.prototype member stays a plain value.
    const params = Object.create(null) as Record<string, string>;
    pos = 1;
    for (const seg of segments) {
      let next = path.indexOf('/', pos);
      if (next === -1 || next > end) next = end;
      if (seg.capture !== null) {
        try {
          params[seg.capture] = decodeURIComponent(path.slice(pos, next));
        } catch {
          return null; // malformed percent-encoding: not this route
        }
      }
      pos = next + 1;
    }
    return Object.freeze(params);
  }
}
