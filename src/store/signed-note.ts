import {
  createHash,
  createPrivateKey,
  createPublicKey,
  type KeyObject,
  randomBytes,
  sign,
  verify,
} from 'node:crypto';
import { checkNoteCharacters, decodeBase64, decodeUtf8, isNoteName, SignedNoteError } from './note-text.js';

// One module to import for notes and their checkpoints.
export { checkpointBody, parseCheckpointBody } from './checkpoint-body.js';
export { isNoteName, SignedNoteError } from './note-text.js';

/**
 * Signed notes (https://c2sp.org/signed-note) with Ed25519 keys, in the key formats of Go's
 * golang.org/x/mod/sumdb/note, and the checkpoint bodies of https://c2sp.org/tlog-checkpoint: the
 * form transparency logs publish their signed tree heads in, so the audit log's checkpoints can be
 * checked by tools that know nothing of effectgate. node:crypto only.
 */

export interface NoteSigner {
  readonly name: string;
  /** The key ID: 8 lowercase hex digits, SHA-256(name || "\n" || 0x01 || public key)[:4]. */
  readonly keyId: string;
  /** The matching verifier key, `<name>+<keyId>+<base64(0x01 || public key)>`. */
  readonly verifierKey: string;
  /** The 64-byte Ed25519 signature of `message`. */
  sign(message: Uint8Array): Buffer;
}

export interface NoteVerifier {
  readonly name: string;
  readonly keyId: string;
  readonly verifierKey: string;
  verify(message: Uint8Array, signature: Uint8Array): boolean;
}

export interface OpenedNote {
  /** The note text, final newline included. Untrusted unless `verifiedBy` names a trusted key. */
  readonly text: string;
  readonly signatures: readonly {
    readonly name: string;
    readonly keyId: string;
    readonly verified: boolean;
  }[];
  /** The names of the given verifiers whose signature checked. */
  readonly verifiedBy: readonly string[];
}

const ED25519 = 0x01;
// DER prefixes of a PKCS#8 Ed25519 private key and an SPKI Ed25519 public key (RFC 8410): each is
// followed by the 32 raw key bytes.
const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
/** More signatures than this in one note is refused, as Go's note.Open does; the spec asks for 16. */
const MAX_SIGNATURES = 100;
const SIGNATURE_PREFIX = '\u2014 ';

/** A new Ed25519 key pair for `name`, as Go's note.GenerateKey writes it. */
export function generateNoteKey(name: string): { readonly signerKey: string; readonly verifierKey: string } {
  checkName(name, 'key');
  const seed = randomBytes(32);
  const pub = publicKeyOf(privateKeyOf(seed));
  const keyId = keyIdOf(name, pub);
  return Object.freeze({
    signerKey: `PRIVATE+KEY+${name}+${keyId}+${Buffer.concat([Buffer.from([ED25519]), seed]).toString('base64')}`,
    verifierKey: verifierKeyOf(name, keyId, pub),
  });
}

/** A signer from `PRIVATE+KEY+<name>+<keyId>+<base64(0x01 || seed)>`; its key ID must match it. */
export function parseSignerKey(text: string): NoteSigner {
  const trimmed = text.trim();
  if (!trimmed.startsWith('PRIVATE+KEY+')) {
    throw new SignedNoteError('A note signer key starts with PRIVATE+KEY+ (this is not one).');
  }
  // The secret part is never put in a message.
  const { name, keyId, key } = splitKey(trimmed.slice('PRIVATE+KEY+'.length), 'signer');
  const privateKey = privateKeyOf(key);
  const pub = publicKeyOf(privateKey);
  if (keyIdOf(name, pub) !== keyId) {
    throw new SignedNoteError(
      `The note signer key of ${name} names key ID ${keyId}, which is not its key's: the key or its name was changed.`,
    );
  }
  const verifierKey = verifierKeyOf(name, keyId, pub);
  return Object.freeze({
    name,
    keyId,
    verifierKey,
    sign: (message: Uint8Array): Buffer => sign(null, message, privateKey),
  });
}

/** A verifier from `<name>+<keyId>+<base64(0x01 || public key)>`; its key ID must match it. */
export function parseVerifierKey(text: string): NoteVerifier {
  const trimmed = text.trim();
  if (trimmed.startsWith('PRIVATE+KEY+')) {
    throw new SignedNoteError('A note signer key (a secret) was given where a verifier key was expected.');
  }
  const { name, keyId, key } = splitKey(trimmed, 'verifier');
  if (keyIdOf(name, key) !== keyId) {
    throw new SignedNoteError(
      `The note verifier key ${trimmed} names key ID ${keyId}, which is not its key's: the key or its name was changed.`,
    );
  }
  let publicKey: KeyObject;
  try {
    publicKey = createPublicKey({ key: Buffer.concat([SPKI_PREFIX, key]), format: 'der', type: 'spki' });
  } catch {
    throw new SignedNoteError(`The note verifier key ${trimmed} is not an Ed25519 public key.`);
  }
  return Object.freeze({
    name,
    keyId,
    verifierKey: verifierKeyOf(name, keyId, key),
    verify: (message: Uint8Array, signature: Uint8Array): boolean => {
      if (signature.length !== 64) return false;
      try {
        return verify(null, message, publicKey, signature);
      } catch {
        return false;
      }
    },
  });
}

/** `text` (ending in a newline), a blank line, and one `— <name> <base64(keyId || signature)>` line per signer. */
export function signNote(text: string, signers: readonly NoteSigner[]): string {
  if (!text.endsWith('\n')) throw new SignedNoteError('A note text must end with a newline.');
  checkNoteCharacters(text, 'A note text');
  if (signers.length === 0) throw new SignedNoteError('A note needs at least one signer.');
  const message = Buffer.from(text, 'utf8');
  let lines = '';
  for (const signer of signers) {
    checkName(signer.name, 'signer');
    if (!/^[0-9a-f]{8}$/.test(signer.keyId)) {
      throw new SignedNoteError(`The note signer ${signer.name} has no key ID of 8 lowercase hex digits.`);
    }
    const signature = Buffer.concat([Buffer.from(signer.keyId, 'hex'), signer.sign(message)]);
    lines += `${SIGNATURE_PREFIX}${signer.name} ${signature.toString('base64')}\n`;
  }
  return `${text}\n${lines}`;
}

/**
 * A note's text and signatures, each checked by the given verifier of the same name and key ID
 * (one from an unknown key is kept, unverified; so is one that does not check: the caller decides,
 * from `verifiedBy`, whether the note is trusted). A note that is not well-formed is refused.
 * Bytes are read as strict UTF-8.
 */
export function openNote(note: string | Uint8Array, verifiers: readonly NoteVerifier[]): OpenedNote {
  const msg = typeof note === 'string' ? note : decodeUtf8(note);
  checkNoteCharacters(msg, 'A signed note');
  // The text ends at the last blank line; it may hold blank lines of its own.
  const split = msg.lastIndexOf('\n\n');
  if (split < 0) throw new SignedNoteError('A signed note has no blank line before its signatures.');
  const text = msg.slice(0, split + 1);
  const block = msg.slice(split + 2);
  if (block === '' || !block.endsWith('\n')) {
    throw new SignedNoteError('A signed note ends with its signature lines, each ending in a newline.');
  }
  const lines = block.slice(0, -1).split('\n');
  if (lines.length > MAX_SIGNATURES) {
    throw new SignedNoteError(`A signed note has more than ${MAX_SIGNATURES} signatures.`);
  }
  const message = Buffer.from(text, 'utf8');
  const seen = new Set<string>();
  const signatures: { name: string; keyId: string; verified: boolean }[] = [];
  const verifiedBy: string[] = [];
  for (const [i, line] of lines.entries()) {
    const where = `A signed note's signature line ${i + 1}`;
    if (!line.startsWith(SIGNATURE_PREFIX)) throw new SignedNoteError(`${where} does not start with "— ".`);
    if (seen.has(line)) continue;
    seen.add(line);
    const rest = line.slice(SIGNATURE_PREFIX.length);
    const space = rest.indexOf(' ');
    const name = space < 0 ? rest : rest.slice(0, space);
    const raw = space < 0 ? null : decodeBase64(rest.slice(space + 1));
    if (!isNoteName(name)) throw new SignedNoteError(`${where} names no valid key name.`);
    if (raw === null || raw.length < 5)
      throw new SignedNoteError(`${where} has no base64 key ID and signature.`);
    const keyId = raw.subarray(0, 4).toString('hex');
    const known = new Map<string, NoteVerifier>();
    for (const v of verifiers) if (v.name === name && v.keyId === keyId) known.set(v.verifierKey, v);
    if (known.size > 1) throw new SignedNoteError(`Two different verifier keys are named ${name}+${keyId}.`);
    const verifier = [...known.values()][0];
    const verified = verifier?.verify(message, raw.subarray(4)) === true;
    signatures.push(Object.freeze({ name, keyId, verified }));
    if (verified && !verifiedBy.includes(name)) verifiedBy.push(name);
  }
  return Object.freeze({
    text,
    signatures: Object.freeze(signatures),
    verifiedBy: Object.freeze(verifiedBy),
  });
}

/** `name+keyId+base64` split at its first two `+` (the base64 may hold more), each part checked. */
function splitKey(text: string, kind: 'signer' | 'verifier'): { name: string; keyId: string; key: Buffer } {
  const first = text.indexOf('+');
  const second = first < 0 ? -1 : text.indexOf('+', first + 1);
  if (second < 0)
    throw new SignedNoteError(
      `A note ${kind} key has the form ${kind === 'signer' ? 'PRIVATE+KEY+' : ''}<name>+<key ID>+<key>.`,
    );
  const name = text.slice(0, first);
  const keyId = text.slice(first + 1, second);
  checkName(name, `${kind} key`);
  if (!/^[0-9a-f]{8}$/.test(keyId)) {
    throw new SignedNoteError(`The note ${kind} key of ${name} has no key ID of 8 lowercase hex digits.`);
  }
  const key = decodeBase64(text.slice(second + 1));
  if (key === null || key.length === 0)
    throw new SignedNoteError(`The note ${kind} key of ${name} is not base64.`);
  if (key[0] !== ED25519) {
    throw new SignedNoteError(`The note ${kind} key of ${name} is of algorithm ${key[0]}, not 1 (Ed25519).`);
  }
  if (key.length !== 33) throw new SignedNoteError(`The note ${kind} key of ${name} is not 32 bytes long.`);
  return { name, keyId, key: key.subarray(1) };
}

function privateKeyOf(seed: Buffer): KeyObject {
  return createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' });
}

function publicKeyOf(privateKey: KeyObject): Buffer {
  return createPublicKey(privateKey).export({ format: 'der', type: 'spki' }).subarray(SPKI_PREFIX.length);
}

function keyIdOf(name: string, pub: Uint8Array): string {
  return createHash('sha256')
    .update(`${name}\n`)
    .update(Buffer.from([ED25519]))
    .update(pub)
    .digest('hex')
    .slice(0, 8);
}

function verifierKeyOf(name: string, keyId: string, pub: Uint8Array): string {
  return `${name}+${keyId}+${Buffer.concat([Buffer.from([ED25519]), pub]).toString('base64')}`;
}

function checkName(name: string, what: string): void {
  if (!isNoteName(name)) {
    throw new SignedNoteError(
      `A note ${what} name must be non-empty, without spaces, + or control characters: ${JSON.stringify(name)}.`,
    );
  }
}
