/**
 * The one reading of "the same member name but for letter case" the gate uses wherever a server
 * may bind names case-insensitively: duplicate JSON members, a name given in the query and the
 * body, `match.body` conditions met only so, key paths reached only so.
 *
 * It must be at least as wide as the widest binder in use. Go's encoding/json matches a member to
 * a struct field under Unicode simple case folding (`bytes.EqualFold`), so `"ſtatus"` (U+017F) is
 * `status` and `"\u212Aind"` (KELVIN SIGN) is `kind`, which plain `toLowerCase()` misses; .NET's
 * ordinal-ignore-case compares upper-cased forms, so `ı` (dotless i) is `i` there. Each code point
 * is mapped to the lower case of its upper case when both are single code points (`ſ` → `S` → `s`,
 * `K` → `K` → `k`, `ı` → `I` → `i`), else to its lower case when that is one code point, else kept.
 * Wider than Go is the safe side: two names folded together that a server keeps apart can only make
 * the gate refuse a body as ambiguous, never let one through.
 *
 * @example foldName('ſtatus') === foldName('STATUS') // true
 */
export function foldName(name: string): string {
  // ASCII-only names (nearly all) take the fast path, which gives the same answer.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the range is "any ASCII", not a control character check.
  if (/^[\u0000-\u007f]*$/.test(name)) return name.toLowerCase();
  let out = '';
  for (const char of name) out += foldCodePoint(char);
  return out;
}

function foldCodePoint(char: string): string {
  const upper = char.toUpperCase();
  if (isOneCodePoint(upper)) {
    const lower = upper.toLowerCase();
    if (isOneCodePoint(lower)) return lower;
  }
  const lower = char.toLowerCase();
  return isOneCodePoint(lower) ? lower : char;
}

function isOneCodePoint(s: string): boolean {
  const first = s.codePointAt(0);
  return first !== undefined && s.length === (first > 0xffff ? 2 : 1);
}
