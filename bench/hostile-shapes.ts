/** The hostile bodies of `hostile-bodies.ts`, by name, shared with its client process. */
import { BODY_LIMITS } from '../src/engine/json-scan.js';

export const HOSTILE_CLIENTS = 4;
const MIB = 1024 * 1024;
const SIZE = MIB - 1024;

/** `{"title":…,"a":[[[…]]]}` of about `bytes` bytes: nesting as deep as the bytes allow. */
function deepBody(bytes: number): string {
  const depth = Math.floor((bytes - 32) / 2);
  return `{"title":"deep","a":${'['.repeat(depth)}${']'.repeat(depth)}}`;
}

/** `{"title":…,"k0":0,"k1":0,…}` of about `bytes` bytes, or with exactly `members` members. */
function wideBody(bytes: number, members = Number.POSITIVE_INFINITY): string {
  const parts: string[] = [];
  let length = 32;
  for (let i = 0; i < members; i++) {
    const part = `"k${i}":0`;
    if (length + part.length + 1 > bytes) break;
    parts.push(part);
    length += part.length + 1;
  }
  return `{"title":"wide","body":${JSON.stringify('x'.repeat(Math.max(0, bytes - length - 2)))},${parts.join(',')}}`;
}

/** Shape name → what the bench prints for it. */
export const HOSTILE_SHAPES: Readonly<Record<string, string>> = Object.freeze({
  flat: '1 MB flat string',
  deep: '1 MB deeply nested',
  wide: '1 MB wide (many members)',
  'wide-under-limit': '1 MB wide, just under the node limit',
});

export function hostileBody(shape: string): string {
  switch (shape) {
    case 'flat':
      return JSON.stringify({ title: 'flat', body: 'x'.repeat(SIZE) });
    case 'deep':
      return deepBody(SIZE);
    case 'wide':
      return wideBody(SIZE);
    case 'wide-under-limit':
      // Just under the node limit (each member is a name and a value): what still gets parsed.
      return wideBody(SIZE, Math.floor(BODY_LIMITS.maxNodes / 2) - 3);
    default:
      throw new Error(`unknown hostile shape ${JSON.stringify(shape)}`);
  }
}
