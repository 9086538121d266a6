// Puts an idempotency key into a request body in place (`idempotency.body`), changing no other
// byte: the destination reads the body the agent wrote, with one member set.

const encoder = new TextEncoder();
const decoder = new TextDecoder();

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;

/** A body the key cannot be put into; the message says why (it ends a refusal's detail). */
export class SpliceError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SpliceError';
  }
}

/**
 * `body` with the member at `members` (from the root object down) set to the string `value`:
 * its value replaced when present, else the member (and any missing objects above it) added after
 * the object's last member. Every other byte is kept. Throws `SpliceError` when the body is not a
 * JSON object or a step on the way holds something other than an object.
 */
export function spliceJsonMember(body: Uint8Array, members: readonly string[], value: string): Uint8Array {
  let at = skipSpace(body, 0);
  if (body[at] !== OPEN_BRACE) throw new SpliceError('the body is not a JSON object');
  const path: string[] = [];
  for (let depth = 0; depth < members.length; depth++) {
    const name = members[depth]!;
    const found = findMember(body, at, name);
    const last = depth === members.length - 1;
    if (found.value === null) {
      const rest = members
        .slice(depth + 1)
        .reduceRight<string>((inner, m) => `{${JSON.stringify(m)}:${inner}}`, JSON.stringify(value));
      const member = `${JSON.stringify(name)}:${rest}`;
      return join(body, found.insertAt, found.insertAt, found.empty ? member : `,${member}`);
    }
    path.push(name);
    if (last) return join(body, found.value, found.valueEnd, JSON.stringify(value));
    if (body[found.value] !== OPEN_BRACE) throw new SpliceError(`$.${path.join('.')} is not an object`);
    at = found.value;
  }
  throw new SpliceError('no member to set');
}

/**
 * A form body (`application/x-www-form-urlencoded`) with the top-level field `name` set to `value`:
 * the first such field's value replaced, else `name=value` appended. Other fields keep their bytes.
 */
export function spliceFormField(body: Uint8Array, members: readonly string[], value: string): Uint8Array {
  if (members.length !== 1) throw new SpliceError('a form body has no nested members');
  const name = members[0]!;
  const text = decoder.decode(body);
  const encoded = `${encodeURIComponent(name)}=${encodeURIComponent(value)}`;
  let offset = 0;
  for (const pair of text.split('&')) {
    const eq = pair.indexOf('=');
    const raw = eq < 0 ? pair : pair.slice(0, eq);
    if (formDecode(raw) === name) {
      return encoder.encode(text.slice(0, offset) + encoded + text.slice(offset + pair.length));
    }
    offset += pair.length + 1;
  }
  return encoder.encode(text === '' ? encoded : `${text}&${encoded}`);
}

function formDecode(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return text;
  }
}

interface Found {
  /** Start of the member's value, or null when the object has no such member. */
  readonly value: number | null;
  readonly valueEnd: number;
  /** Where a new member goes: after the last member's value, or after `{` of an empty object. */
  readonly insertAt: number;
  readonly empty: boolean;
}

/** Looks for member `name` in the object whose `{` is at `open`. */
function findMember(body: Uint8Array, open: number, name: string): Found {
  let at = skipSpace(body, open + 1);
  if (body[at] === CLOSE_BRACE) return { value: null, valueEnd: 0, insertAt: open + 1, empty: true };
  for (;;) {
    if (body[at] !== QUOTE) throw new SpliceError('the body is not valid JSON');
    const nameEnd = skipString(body, at);
    const member = JSON.parse(decoder.decode(body.subarray(at, nameEnd))) as string;
    at = skipSpace(body, nameEnd);
    if (body[at] !== COLON) throw new SpliceError('the body is not valid JSON');
    const value = skipSpace(body, at + 1);
    const valueEnd = skipValue(body, value);
    if (member === name) return { value, valueEnd, insertAt: valueEnd, empty: false };
    at = skipSpace(body, valueEnd);
    if (body[at] === CLOSE_BRACE) return { value: null, valueEnd: 0, insertAt: valueEnd, empty: false };
    if (body[at] !== COMMA) throw new SpliceError('the body is not valid JSON');
    at = skipSpace(body, at + 1);
  }
}

function skipSpace(body: Uint8Array, at: number): number {
  while (
    at < body.length &&
    (body[at] === 0x20 || body[at] === 0x09 || body[at] === 0x0a || body[at] === 0x0d)
  )
    at++;
  return at;
}

/** The index after the string whose opening quote is at `at`. */
function skipString(body: Uint8Array, at: number): number {
  for (let i = at + 1; i < body.length; i++) {
    if (body[i] === BACKSLASH) i++;
    else if (body[i] === QUOTE) return i + 1;
  }
  throw new SpliceError('the body is not valid JSON');
}

/** The index after the value starting at `at`. */
function skipValue(body: Uint8Array, at: number): number {
  const first = body[at];
  if (first === QUOTE) return skipString(body, at);
  if (first === OPEN_BRACE || first === OPEN_BRACKET) {
    let depth = 0;
    for (let i = at; i < body.length; i++) {
      const c = body[i];
      if (c === QUOTE) i = skipString(body, i) - 1;
      else if (c === OPEN_BRACE || c === OPEN_BRACKET) depth++;
      else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
        depth--;
        if (depth === 0) return i + 1;
      }
    }
    throw new SpliceError('the body is not valid JSON');
  }
  let i = at;
  while (i < body.length && body[i] !== COMMA && body[i] !== CLOSE_BRACE && body[i] !== CLOSE_BRACKET) {
    if (body[i] === 0x20 || body[i] === 0x09 || body[i] === 0x0a || body[i] === 0x0d) break;
    i++;
  }
  if (i === at) throw new SpliceError('the body is not valid JSON');
  return i;
}

function join(body: Uint8Array, from: number, to: number, text: string): Uint8Array {
  const middle = encoder.encode(text);
  const out = new Uint8Array(from + middle.length + body.length - to);
  out.set(body.subarray(0, from), 0);
  out.set(middle, from);
  out.set(body.subarray(to), from + middle.length);
  return out;
}
