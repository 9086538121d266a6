import type { Tool } from './types.js';

/**
 * A request path as a lenient server may read it, and which liberties were taken to get there.
 * Strict matching (the normalized path as sent) decides governance; this reading only decides
 * whether a miss is a near miss that a destination would route to the tool anyway.
 */
export interface LenientPath {
  readonly path: string;
  /** The readings that changed the path, in the order applied; empty when none did. */
  readonly readings: readonly string[];
}

const BACKSLASH = /\\|%5C/gi;
const ENCODED_SLASH = /%2F/gi;
const SLASH_RUN = /\/{2,}/g;
/** What any of `lenientPath`'s readings looks for: `\`, `%` (`%5C`, `%2F`), `;`, `.`, `//`. */
const MAY_READ_OTHERWISE = /[\\%;.]|\/\//;
const NO_READINGS: readonly string[] = Object.freeze([]);

/**
 * What common servers do to a path before routing it: `\` (and `%5C`) taken for `/` (IIS, some
 * Node and Python routers), `%2F` decoded before splitting (many proxies and frameworks),
 * `;params` dropped from segments (Servlet containers, Spring), `//` merged (nginx
 * `merge_slashes`, most routers), and dot segments resolved again when those readings produced
 * new ones, and a format suffix dropped from the last segment (`/issues.json`, `/issues/7.json`:
 * Rails' implicit `(.:format)`). Case folding is not a rewrite of the path but of the comparison:
 * `PathTemplate.matchFolded` does it. One trailing `/` is already ignored by strict matching.
 * Without `formatSuffix` the last reading is left out: a dot in a route's own last segment
 * (`/api/chat.postMessage`) is no format, and the other readings must still reach that route.
 */
export function lenientPath(path: string, formatSuffix = true): LenientPath {
  // Asked of every request to a governed host that no tool matches: a path none of the readings
  // can change (the usual one) costs one scan and a small object.
  if (!MAY_READ_OTHERWISE.test(path)) return { path, readings: NO_READINGS };
  const readings: string[] = [];
  let p = path;
  const apply = (reading: string, next: string): void => {
    if (next !== p) {
      readings.push(reading);
      p = next;
    }
  };
  if (p.includes('\\') || p.includes('%5')) apply('\\ read as /', p.replace(BACKSLASH, '/'));
  if (p.includes('%2')) apply('%2F decoded to /', p.replace(ENCODED_SLASH, '/'));
  if (p.includes(';')) apply(';params dropped', dropParams(p));
  if (p.includes('//')) apply('// merged', p.replace(SLASH_RUN, '/'));
  if (p.includes('.')) apply('dot segments resolved', removeDots(p));
  // Rails routes `/issues.json` and `/issues/7.json` to the `/issues` and `/issues/:id` actions
  // (the implicit `(.:format)` segment), as Spring did with suffix patterns.
  if (formatSuffix && p.includes('.')) apply('format suffix dropped', dropFormatSuffix(p));
  return { path: p, readings };
}

/**
 * A request on a governed host that misses every tool strictly but would hit `tool` under a
 * lenient reading: the gate refuses it rather than letting an effect out ungoverned.
 */
export class LenientMatch {
  readonly tool: Tool;
  readonly readings: readonly string[];

  constructor(tool: Tool, readings: readonly string[]) {
    this.tool = tool;
    this.readings = Object.freeze([...readings]);
    Object.freeze(this);
  }

  /** E.g. `POST api.github.com /repos/{owner}/{repo}/issues, if read with: \ read as /, case folded`. */
  explain(): string {
    return `${this.tool.match.explain()}, if read with: ${this.readings.join(', ')}`;
  }
}

const FORMAT_SUFFIX = /^(\/(?:[^/]*\/)*[^/]+?)\.[A-Za-z0-9_-]+(\/?)$/;

/** `/a/b.json` → `/a/b`; `/a/b.json/` → `/a/b/`. Only the last segment, and never a whole one. */
function dropFormatSuffix(path: string): string {
  const m = FORMAT_SUFFIX.exec(path);
  return m === null ? path : `${m[1]}${m[2]}`;
}

function dropParams(path: string): string {
  return path
    .split('/')
    .map((segment) => {
      const semi = segment.indexOf(';');
      return semi === -1 ? segment : segment.slice(0, semi);
    })
    .join('/');
}

/** RFC 3986 §5.2.4 on whole segments (the strict path had its own dots removed already). */
function removeDots(path: string): string {
  const segments = path.split('/');
  const out: string[] = [];
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i]!;
    if (segment === '.' || segment === '..') {
      if (segment === '..' && out.length > 1) out.pop();
      if (i === segments.length - 1) out.push('');
      continue;
    }
    out.push(segment);
  }
  return out.join('/');
}
