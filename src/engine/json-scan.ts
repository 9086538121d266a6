import { foldName } from '../policy/index.js';

/**
 * Limits on the shape of a governed JSON body, checked by one linear scan before anything costly
 * runs over it (JSON.parse, canonical JSON, JSONPath, structured clones): those are synchronous on
 * the gate's one event loop, so a body that is cheap to send but dear to read would stall every
 * other request, governed or not (measured: four 1 MB nested bodies took ungoverned p50 from
 * 0.8 ms to 638 ms). Both limits are far above what API payloads carry; `createGate({ bodyLimits })`
 * overrides them.
 */
export interface BodyLimits {
  /**
   * Deepest nesting of arrays and objects (the root container is depth 1). 64 is the default of
   * .NET's System.Text.Json, so APIs behind ASP.NET already refuse deeper bodies.
   */
  readonly maxDepth: number;
  /**
   * Most nodes in one body, where every value (scalar, array or object) and every member name
   * counts one. A 1 MiB body (the default byte limit) of ordinary API data holds some 20,000 to
   * 50,000; reaching 100,000 takes about ten bytes per node, as in `[0,0,0,…]` or `{"k1":0,…}`.
   */
  readonly maxNodes: number;
}

/** The defaults, in this one place (README "Choices made where the contract is silent"). */
export const BODY_LIMITS: BodyLimits = Object.freeze({ maxDepth: 64, maxNodes: 100_000 });

/** What one scan found; only `json` and `duplicate_member` bodies are worth a JSON.parse. */
export type JsonScan =
  | { readonly kind: 'json' }
  /** Certainly not JSON (the scan is lenient: `json` does not promise that JSON.parse accepts it). */
  | { readonly kind: 'not_json' }
  /** The first member name repeated in its object; `path` is the JSONPath of the repeat. */
  | { readonly kind: 'duplicate_member'; readonly path: string }
  /** `path` is the container that goes past `maxDepth`; the scan stopped there. */
  | { readonly kind: 'too_deep'; readonly path: string }
  /** The scan stopped at node `maxNodes + 1`. */
  | { readonly kind: 'too_many_nodes' };

interface Frame {
  readonly object: boolean;
  /** Member names seen so far (objects), created on the first member. */
  names: Set<string> | null;
  /** Current member name (objects) or element index (arrays), for the path of a refusal. */
  at: string | number;
  /** The current member's name was seen before in this object. */
  repeated: boolean;
}

const WS_SPACE = 0x20;
const WS_TAB = 0x09;
const WS_LF = 0x0a;
const WS_CR = 0x0d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/**
 * One pass over `text` without building anything: tracks depth, counts nodes and compares member
 * names per object (decoded, so `"a"` and `"\u0061"` are the same name, as JSON.parse sees them).
 * It stops at the first limit passed, so a hostile body costs at most the bytes up to it. `root` is
 * the JSONPath the body has in the argument document, for the path of a refusal.
 *
 * The scan is lenient where leniency is free (string contents, number spelling): JSON.parse still
 * judges those, and is only run when the scan found nothing to refuse.
 *
 * @example scanJson('{"a":1,"a":2}', BODY_LIMITS) // { kind: 'duplicate_member', path: '$.body.a' }
 */
export function scanJson(text: string, limits: BodyLimits, root = '$.body'): JsonScan {
  const stack: Frame[] = [];
  const n = text.length;
  let i = skipWs(text, 0);
  let nodes = 0;
  let duplicate: string | null = null;
  // Each turn reads one value, then closes containers and consumes separators up to the next one.
  for (;;) {
    if (++nodes > limits.maxNodes) return { kind: 'too_many_nodes' };
    if (i >= n) return NOT_JSON;
    const c = text.charCodeAt(i);
    if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (stack.length >= limits.maxDepth) return { kind: 'too_deep', path: pathOf(root, stack) };
      i = skipWs(text, i + 1);
      const object = c === OPEN_BRACE;
      if (text.charCodeAt(i) === (object ? CLOSE_BRACE : CLOSE_BRACKET)) {
        i++;
      } else {
        const frame: Frame = { object, names: null, at: 0, repeated: false };
        stack.push(frame);
        if (object) {
          i = readName(text, i, frame);
          if (i < 0) return NOT_JSON;
          nodes++;
        }
        continue;
      }
    } else if (c === QUOTE) {
      i = stringEnd(text, i);
      if (i < 0) return NOT_JSON;
    } else if (c === 0x74 /* t */ && text.startsWith('true', i)) {
      i += 4;
    } else if (c === 0x66 /* f */ && text.startsWith('false', i)) {
      i += 5;
    } else if (c === 0x6e /* n */ && text.startsWith('null', i)) {
      i += 4;
    } else {
      const start = i;
      while (i < n && isNumberChar(text.charCodeAt(i))) i++;
      if (i === start) return NOT_JSON;
    }
    // After a value: close what ends here, then expect the next element or member.
    for (;;) {
      i = skipWs(text, i);
      const frame = stack[stack.length - 1];
      if (frame === undefined) {
        if (i !== n) return NOT_JSON;
        return duplicate === null ? JSON_OK : { kind: 'duplicate_member', path: duplicate };
      }
      const d = text.charCodeAt(i);
      if (d === (frame.object ? CLOSE_BRACE : CLOSE_BRACKET)) {
        i++;
        stack.pop();
        continue;
      }
      if (d !== COMMA) return NOT_JSON;
      i = skipWs(text, i + 1);
      if (frame.object) {
        i = readName(text, i, frame);
        if (i < 0) return NOT_JSON;
        nodes++;
        if (frame.repeated) duplicate ??= pathOf(root, stack);
      } else {
        frame.at = (frame.at as number) + 1;
      }
      break;
    }
  }
}

const JSON_OK: JsonScan = Object.freeze({ kind: 'json' });
const NOT_JSON: JsonScan = Object.freeze({ kind: 'not_json' });

function skipWs(text: string, from: number): number {
  let i = from;
  for (;;) {
    const c = text.charCodeAt(i);
    if (c !== WS_SPACE && c !== WS_LF && c !== WS_CR && c !== WS_TAB) return i;
    i++;
  }
}

/** Digits, `-`, `+`, `.`, `e`, `E`: enough to step over a number; JSON.parse judges its spelling. */
function isNumberChar(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x2b || c === 0x2e || c === 0x65 || c === 0x45;
}

/** Index after the string whose opening quote is at `at`, or -1 if it never ends. */
function stringEnd(text: string, at: number): number {
  let j = at;
  for (;;) {
    // indexOf is native; a quote is escaped only after an odd run of backslashes.
    j = text.indexOf('"', j + 1);
    if (j < 0) return -1;
    let k = j - 1;
    while (text.charCodeAt(k) === BACKSLASH) k--;
    if ((j - 1 - k) % 2 === 0) return j + 1;
  }
}

/**
 * Reads `"name" :` at `at` into `frame.at` and returns the index after the colon (and the spaces
 * after it), or -1 when the text is not a member there. A repeated name sets `frame.repeated`.
 */
function readName(text: string, at: number, frame: Frame): number {
  if (text.charCodeAt(at) !== QUOTE) return -1;
  const end = stringEnd(text, at);
  if (end < 0) return -1;
  let name = text.slice(at + 1, end - 1);
  if (name.includes('\\')) {
    try {
      name = JSON.parse(`"${name}"`) as string;
    } catch {
      return -1;
    }
  }
  frame.at = name;
  // Compared without letter case, Unicode folding included: Go's encoding/json (and other
  // case-insensitive binders) take `title`, `Title` and `ſtatus`/`status` for one field, so they are
  // as ambiguous as an exact repeat (`foldName`).
  const folded = foldName(name);
  if (frame.names === null) frame.names = new Set([folded]);
  else if (frame.names.has(folded)) frame.repeated = true;
  else frame.names.add(folded);
  const i = skipWs(text, end);
  if (text.charCodeAt(i) !== COLON) return -1;
  return skipWs(text, i + 1);
}

const PLAIN_NAME = /^[A-Za-z_$][\w$]*$/;

/** `root` followed by `.name`, `["odd name"]` or `[index]` for each open container. */
function pathOf(root: string, stack: readonly Frame[]): string {
  let path = root;
  for (const f of stack) path = appendStep(path, f.at);
  return path;
}

/** One JSONPath step: `.name` when the name is plain, else the bracketed JSON string; `[i]` for an index. */
export function appendStep(path: string, step: string | number): string {
  if (typeof step === 'number') return `${path}[${step}]`;
  return PLAIN_NAME.test(step) ? `${path}.${step}` : `${path}[${JSON.stringify(step)}]`;
}
