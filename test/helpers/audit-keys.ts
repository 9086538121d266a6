import {
  generateNoteKey,
  type NoteSigner,
  type NoteVerifier,
  parseSignerKey,
  parseVerifierKey,
} from '../../src/store/signed-note.js';

/** A fresh audit key named `name`: its signer (for a sealer) and its verifier (for verify). */
export function testAuditKey(name: string): { readonly signer: NoteSigner; readonly verifier: NoteVerifier } {
  const key = generateNoteKey(name);
  return { signer: parseSignerKey(key.signerKey), verifier: parseVerifierKey(key.verifierKey) };
}
