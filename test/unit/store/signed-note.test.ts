import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { EffectgateError } from '../../../src/errors.js';
import {
  checkpointBody,
  generateNoteKey,
  isNoteName,
  openNote,
  parseCheckpointBody,
  parseSignerKey,
  parseVerifierKey,
  SignedNoteError,
  signNote,
} from '../../../src/store/signed-note.js';

// Known answers of Go's golang.org/x/mod/sumdb/note (note_test.go): keys, a text, its signatures.
const PETER_SKEY = 'PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz';
const PETER_VKEY = 'PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW';
const ENOCH_VKEY = 'EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop';
const TEXT =
  "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
const PETER_SIG =
  '— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n';
const ENOCH_SIG =
  '— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n';

/** A verifier key of `n` key bytes whose key ID matches it. */
function wrongLengthKey(n: number): string {
  const key = Buffer.concat([Buffer.from([1]), Buffer.alloc(n, 7)]);
  const id = createHash('sha256').update('w\n').update(key).digest('hex').slice(0, 8);
  return `w+${id}+${key.toString('base64')}`;
}

const refused = (fn: () => unknown): SignedNoteError => {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(SignedNoteError);
    expect((err as EffectgateError).code).toBe('EG_ERR_AUDIT_KEY_INVALID');
    return err as SignedNoteError;
  }
  throw new Error('not refused');
};

describe('note keys', () => {
  it("reads Go's signer and verifier keys, with the same name, key ID and verifier key", () => {
    const signer = parseSignerKey(PETER_SKEY);
    const verifier = parseVerifierKey(PETER_VKEY);
    expect(signer).toMatchObject({ name: 'PeterNeumann', keyId: 'c74f20a3', verifierKey: PETER_VKEY });
    expect(verifier).toMatchObject({ name: 'PeterNeumann', keyId: 'c74f20a3', verifierKey: PETER_VKEY });
    expect(parseSignerKey(`  ${PETER_SKEY}\n`).keyId).toBe('c74f20a3');
    expect(parseVerifierKey(`${PETER_VKEY}\r\n`).keyId).toBe('c74f20a3');
    const sig = signer.sign(Buffer.from('hi'));
    expect(sig.length).toBe(64);
    expect(verifier.verify(Buffer.from('hi'), sig)).toBe(true);
    expect(verifier.verify(Buffer.from('hj'), sig)).toBe(false);
    sig[0]! ^= 1;
    expect(verifier.verify(Buffer.from('hi'), sig)).toBe(false);
    expect(verifier.verify(Buffer.from('hi'), sig.subarray(1))).toBe(false);
  });

  it('generates keys in the same formats, each reading back as its pair', () => {
    const { signerKey, verifierKey } = generateNoteKey('example.com/audit');
    expect(signerKey).toMatch(/^PRIVATE\+KEY\+example\.com\/audit\+[0-9a-f]{8}\+[A-Za-z0-9+/]{44}$/);
    const signer = parseSignerKey(signerKey);
    const verifier = parseVerifierKey(verifierKey);
    expect(signer.verifierKey).toBe(verifierKey);
    expect(verifier.keyId).toBe(signer.keyId);
    expect(verifierKey).toBe(
      `example.com/audit+${signer.keyId}+${verifierKey.split('+').slice(2).join('+')}`,
    );
    expect(verifier.verify(Buffer.from('m'), signer.sign(Buffer.from('m')))).toBe(true);
    expect(generateNoteKey('example.com/audit').signerKey).not.toBe(signerKey);
  });

  // As Go's TestNewVerifier and TestNewSigner: every part of a key, and every key with one
  // character changed, is refused.
  it.each([
    ['verifier', PETER_VKEY, parseVerifierKey],
    ['signer', PETER_SKEY, parseSignerKey],
  ] as const)('refuses every cut and every one-character change of a %s key', (_kind, key, parse) => {
    for (let i = 0; i <= key.length; i++) {
      for (let j = i + 1; j <= key.length; j++) {
        const part = key.slice(i, j);
        if (part !== key && part.trim() === part) refused(() => parse(part));
      }
    }
    for (let i = 0; i < key.length; i++) {
      refused(() => parse(key.slice(0, i) + String.fromCharCode(key.charCodeAt(i) + 1) + key.slice(i + 1)));
    }
  });

  it.each([
    [
      'a key ID that is not the key’s',
      'PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW',
      /not its key's/,
    ],
    // Go's: a wrong-length key and an unknown algorithm, each with its key ID adjusted to match.
    [
      'a key of the wrong length',
      'PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==',
      // Its last base64 character carries bits past the key: not the one spelling of its bytes.
      /not base64/,
    ],
    ['a key of 31 bytes', wrongLengthKey(31), /32 bytes/],
    [
      'another algorithm',
      'PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW',
      /algorithm 101/,
    ],
    ['bad base64', 'PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10T*', /not base64/],
    ['unpadded base64', 'a+00000000+AQ', /not base64/],
    [
      'an uppercase key ID',
      'PeterNeumann+C74F20A3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW',
      /8 lowercase hex/,
    ],
    ['a name with a space', 'Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW', /name/],
    [
      'a name with a no-break space',
      'Peter\u00a0Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW',
      /name/,
    ],
    ['an empty name', '+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW', /name/],
    ['a signer key', PETER_SKEY, /signer key/],
  ])('refuses a verifier key with %s', (_what, key, message) => {
    expect(refused(() => parseVerifierKey(key)).message).toMatch(message);
  });

  it('refuses a signer key whose key ID is not its key’s, never quoting the secret', () => {
    const bad = PETER_SKEY.replace('c74f20a3', 'c74f20a4');
    const err = refused(() => parseSignerKey(bad));
    expect(err.message).toMatch(/not its key's/);
    expect(err.message).not.toContain('AYEKFALV');
    expect(refused(() => parseSignerKey(PETER_VKEY)).message).toMatch(/PRIVATE\+KEY\+/);
  });

  it('knows a note name: non-empty, without +, spaces or control characters', () => {
    expect(isNoteName('example.com/log42')).toBe(true);
    expect(isNoteName('журнал')).toBe(true);
    for (const bad of [
      '',
      'a+b',
      'a b',
      'a\tb',
      'a\u2028b',
      'a\u3000b',
      'a\u0085b',
      'a\u0001b',
      'a\u007fb',
      'a\ud800',
    ])
      expect(isNoteName(bad), JSON.stringify(bad)).toBe(false);
    expect(() => generateNoteKey('a+b')).toThrow(SignedNoteError);
    expect(() => generateNoteKey('a b')).toThrow(SignedNoteError);
  });
});

describe('signed notes', () => {
  it("signs Go's text with Go's key byte for byte as Go does", () => {
    expect(signNote(TEXT, [parseSignerKey(PETER_SKEY)])).toBe(`${TEXT}\n${PETER_SIG}`);
  });

  it('opens a note Go signed, one signature verified and one from an unknown key kept unverified', () => {
    const peter = parseVerifierKey(PETER_VKEY);
    const enoch = parseVerifierKey(ENOCH_VKEY);
    const note = `${TEXT}\n${PETER_SIG}${ENOCH_SIG}`;
    expect(openNote(note, [peter])).toEqual({
      text: TEXT,
      signatures: [
        { name: 'PeterNeumann', keyId: 'c74f20a3', verified: true },
        { name: 'EnochRoot', keyId: 'af0cfe78', verified: false },
      ],
      verifiedBy: ['PeterNeumann'],
    });
    expect(openNote(Buffer.from(note), [peter, enoch]).verifiedBy).toEqual(['PeterNeumann', 'EnochRoot']);
    expect(openNote(note, []).verifiedBy).toEqual([]);
  });

  it('opens the example of the C2SP signed-note specification', () => {
    const verifier = parseVerifierKey(
      'example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k',
    );
    const note =
      'This is an example message.\n\n— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n';
    expect(openNote(note, [verifier])).toMatchObject({
      text: 'This is an example message.\n',
      verifiedBy: ['example.com/foo'],
    });
  });

  it('round-trips a note with blank lines in its text and two signers', () => {
    const a = parseSignerKey(generateNoteKey('a.example/log').signerKey);
    const b = parseSignerKey(generateNoteKey('b.example/witness').signerKey);
    const text = 'line one\n\nline three, after a blank one\n\n';
    const note = signNote(text, [a, b]);
    const opened = openNote(note, [parseVerifierKey(a.verifierKey), parseVerifierKey(b.verifierKey)]);
    expect(opened.text).toBe(text);
    expect(opened.verifiedBy).toEqual(['a.example/log', 'b.example/witness']);
  });

  it('verifies nothing of a tampered text, nor a signature by another key of the same name', () => {
    const peter = parseVerifierKey(PETER_VKEY);
    const tampered = `${TEXT.replace('cryptography', 'cryptographY')}\n${PETER_SIG}`;
    expect(openNote(tampered, [peter])).toMatchObject({
      signatures: [{ name: 'PeterNeumann', keyId: 'c74f20a3', verified: false }],
      verifiedBy: [],
    });
    const impostor = parseSignerKey(generateNoteKey('PeterNeumann').signerKey);
    const forged = signNote(TEXT, [impostor]);
    expect(openNote(forged, [peter]).verifiedBy).toEqual([]);
    // A signature that does not check, under the known key's name and ID.
    const wrong = signNote(TEXT, [{ ...impostor, keyId: 'c74f20a3', sign: impostor.sign }]);
    expect(openNote(wrong, [peter]).signatures).toEqual([
      { name: 'PeterNeumann', keyId: 'c74f20a3', verified: false },
    ]);
  });

  it('lists a repeated signature line once', () => {
    const opened = openNote(`${TEXT}\n${PETER_SIG}${PETER_SIG}`, [parseVerifierKey(PETER_VKEY)]);
    expect(opened.signatures).toHaveLength(1);
  });

  it('refuses to sign a text without its final newline, with a control character, or with no signer', () => {
    const signer = parseSignerKey(PETER_SKEY);
    expect(refused(() => signNote('abc', [signer])).message).toMatch(/newline/);
    refused(() => signNote('a\tb\n', [signer]));
    refused(() => signNote('a\n', []));
    refused(() => signNote('a\n', [{ ...signer, name: 'bad name', sign: signer.sign }]));
  });

  // Go's badMsgs, then more.
  it.each([
    ['the text alone', TEXT],
    ['no signature after the blank line', `${TEXT}\n`],
    ['a signature line without its newline', `${TEXT}\n${PETER_SIG.slice(0, -1)}`],
    ['a control character', `\u0001${TEXT}\n${PETER_SIG}`],
    [
      'a name with a space',
      `${TEXT}\n— Bad Name x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=`,
    ],
    ['a line after the signatures', `${TEXT}\n${PETER_SIG}Unexpected line.\n`],
    ['a hyphen for the em dash', `${TEXT}\n${PETER_SIG.replace('—', '-')}`],
    ['bad base64', `${TEXT}\n${PETER_SIG.replace('x08go', 'x08g*')}`],
    ['a signature of four bytes', `${TEXT}\n— PeterNeumann x08gow==\n`],
    ['no signature', `${TEXT}\n— PeterNeumann\n`],
    ['a lone surrogate', `\ud800${TEXT}\n${PETER_SIG}`],
    [
      '101 signatures',
      `${TEXT}\n${Array.from({ length: 101 }, (_, i) => PETER_SIG.replace('PeterNeumann', `k${i}`)).join('')}`,
    ],
  ])('refuses a note with %s', (_what, note) => {
    refused(() => openNote(note, [parseVerifierKey(PETER_VKEY)]));
  });

  it('refuses bytes that are not UTF-8', () => {
    const bytes = Buffer.concat([Buffer.from([0xff]), Buffer.from(`${TEXT}\n${PETER_SIG}`)]);
    expect(refused(() => openNote(bytes, [])).message).toMatch(/UTF-8/);
  });

  it('refuses two different verifier keys of one name and key ID', () => {
    const peter = parseVerifierKey(PETER_VKEY);
    const other = parseVerifierKey(ENOCH_VKEY);
    const twin = { ...other, name: peter.name, keyId: peter.keyId, verify: other.verify };
    refused(() => openNote(`${TEXT}\n${PETER_SIG}`, [peter, twin]));
    expect(openNote(`${TEXT}\n${PETER_SIG}`, [peter, peter]).verifiedBy).toEqual(['PeterNeumann']);
  });
});

describe('checkpoint bodies', () => {
  const root = 'aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77';

  it('writes origin, size and base64 root, and reads them back', () => {
    const body = checkpointBody('example.com/log', 3, root);
    expect(body).toBe('example.com/log\n3\nrra8/idLcKFPsGel5VeCZNsPqbUa9eC6FZFY8yngbnc=\n');
    expect(parseCheckpointBody(body)).toEqual({
      origin: 'example.com/log',
      size: 3,
      rootHashHex: root,
      extensions: [],
    });
    const extended = checkpointBody('o', 0, root, ['ext one', 'ext two']);
    expect(extended.endsWith('\next one\next two\n')).toBe(true);
    expect(parseCheckpointBody(extended)).toMatchObject({ size: 0, extensions: ['ext one', 'ext two'] });
  });

  it("reads the C2SP tlog-checkpoint specification's example", () => {
    expect(
      parseCheckpointBody(
        'example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n',
      ),
    ).toEqual({
      origin: 'example.com/behind-the-sofa',
      size: 20852163,
      rootHashHex: Buffer.from('CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=', 'base64').toString('hex'),
      extensions: [],
    });
  });

  it('signs and opens as a note', () => {
    const signer = parseSignerKey(generateNoteKey('example.com/log').signerKey);
    const opened = openNote(signNote(checkpointBody(signer.name, 8, root), [signer]), [
      parseVerifierKey(signer.verifierKey),
    ]);
    expect(opened.verifiedBy).toEqual(['example.com/log']);
    expect(parseCheckpointBody(opened.text).size).toBe(8);
  });

  it.each([
    ['an empty origin', () => checkpointBody('', 1, root)],
    ['an origin of two lines', () => checkpointBody('a\nb', 1, root)],
    ['a negative size', () => checkpointBody('o', -1, root)],
    ['a fractional size', () => checkpointBody('o', 1.5, root)],
    ['an uppercase root', () => checkpointBody('o', 1, root.toUpperCase())],
    ['a short root', () => checkpointBody('o', 1, root.slice(2))],
    ['an empty extension', () => checkpointBody('o', 1, root, [''])],
    ['an extension of two lines', () => checkpointBody('o', 1, root, ['a\nb'])],
    ['a control character', () => checkpointBody('o\u0007', 1, root)],
  ])('will not write a checkpoint with %s', (_what, fn) => {
    refused(fn);
  });

  const r64 = Buffer.from(root, 'hex').toString('base64');
  it.each([
    ['two lines', `o\n3\n`],
    ['no final newline', `o\n3\n${r64}`],
    ['a leading zero', `o\n03\n${r64}\n`],
    ['a sign', `o\n+3\n${r64}\n`],
    ['a size past 2^53', `o\n9007199254740993\n${r64}\n`],
    ['a root of 31 bytes', `o\n3\n${Buffer.alloc(31).toString('base64')}\n`],
    ['a root in hex', `o\n3\n${root}\n`],
    ['an empty origin', `\n3\n${r64}\n`],
    ['an empty extension line', `o\n3\n${r64}\n\n`],
    ['a carriage return', `o\r\n3\n${r64}\n`],
  ])('refuses a checkpoint with %s', (_what, text) => {
    refused(() => parseCheckpointBody(text));
  });
});
