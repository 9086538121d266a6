import { EffectgateError } from '../errors.js';

/**
 * What signed notes (https://c2sp.org/signed-note) and the checkpoints in them share: their error,
 * their character rules, their base64. Kept apart so that src/store/checkpoint-body.ts and
 * src/store/signed-note.ts both use them without importing each other.
 */

/** A key, note or checkpoint that is not well-formed; the message says what is wrong (never a secret). */
export class SignedNoteError extends EffectgateError {
  constructor(message: string) {
    super('EG_ERR_AUDIT_KEY_INVALID', message);
    this.name = 'SignedNoteError';
  }
}

/**
 * Whether `name` may name a note key: non-empty, no `+`, no Unicode space, no control character,
 * no lone surrogate (it must encode as UTF-8).
 */
export function isNoteName(name: string): boolean {
  if (name === '' || /[+\s]/u.test(name) || !isWellFormed(name)) return false;
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f)) return false;
  }
  return true;
}

/** Notes are UTF-8 with no control character but the newline (the spec's rule). */
export function checkNoteCharacters(text: string, what: string): void {
  let control = false;
  for (let i = 0; i < text.length && !control; i++) {
    const c = text.charCodeAt(i);
    control = c < 0x20 && c !== 0x0a;
  }
  if (control || !isWellFormed(text)) {
    throw new SignedNoteError(`${what} holds a control character or is not valid UTF-8.`);
  }
}

/** Standard base64 with padding, only in its one canonical spelling; `null` otherwise. */
export function decodeBase64(text: string): Buffer | null {
  if (!/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(text)) return null;
  const bytes = Buffer.from(text, 'base64');
  return bytes.toString('base64') === text ? bytes : null;
}

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export function decodeUtf8(bytes: Uint8Array): string {
  try {
    return UTF8.decode(bytes);
  } catch {
    throw new SignedNoteError('A signed note is not valid UTF-8.');
  }
}

/** No lone surrogate: the string encodes as UTF-8 (String.prototype.isWellFormed, before Node 20 typed it). */
export function isWellFormed(text: string): boolean {
  return !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(text);
}
