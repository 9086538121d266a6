import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { EffectgateError } from '../errors.js';
import { keyFileBesideStore, readKeyFile, storeKeysDir } from './key-file-beside-store.js';
import { embeddedStoreDir } from './open-store.js';
import {
  generateNoteKey,
  type NoteSigner,
  type NoteVerifier,
  parseSignerKey,
  parseVerifierKey,
  SignedNoteError,
} from './signed-note.js';

/** The audit signing key's file beside an embedded store at DIR: `DIR.keys/audit.key`. */
export const AUDIT_KEY_FILE = 'audit.key';

export interface AuditKey {
  /** `null`: checkpoints are written unsigned. */
  readonly signer: NoteSigner | null;
  readonly source: 'file' | 'beside-store' | 'ephemeral' | 'none';
  /** The key file, when there is one. */
  readonly path: string | null;
  /** True when this call generated the key. */
  readonly created: boolean;
}

/**
 * The key that signs the audit log's checkpoints, never one the database holds (a key kept next to
 * the log it signs would let whoever rewrites the log sign the rewrite):
 *
 * - `keyFile` given: that signer key file (readable by its owner and group only: a Kubernetes
 *   Secret mounted with an `fsGroup` is 0440, the only way a non-root gate reads it, as for the
 *   authority key file);
 * - an embedded store on disk (`pglite:DIR`): `DIR.keys/audit.key`, made on first use when
 *   `create`, else read if it is there (no file: no key);
 * - `pglite:memory`: a key made for this process, gone with the database it signs;
 * - PostgreSQL: none unless given; gates sharing a database cannot share a key they each made.
 */
export async function chooseAuditKey(options: {
  readonly keyFile?: string | undefined;
  readonly storeUrl: string;
  readonly create: boolean;
}): Promise<AuditKey> {
  const { keyFile, storeUrl, create } = options;
  if (keyFile !== undefined) {
    const content = (await readKeyFile(keyFile, { groupReadable: true })) as Buffer;
    return frozen(signerIn(content, keyFile), 'file', keyFile, false);
  }
  if (storeUrl === 'pglite:memory') {
    return frozen(parseSignerKey(generateNoteKey(newAuditKeyName()).signerKey), 'ephemeral', null, true);
  }
  if (storeUrl.startsWith('pglite:')) {
    const dir = embeddedStoreDir(storeUrl);
    if (dir === null) {
      if (!create) return NONE;
      // Making DIR.keys for a store that is not there would leave a key no store uses.
      throw new EffectgateError(
        'EG_ERR_STORE_MISSING',
        `No embedded store at ${storeUrl.slice('pglite:'.length)} to keep the audit key beside: open the store first.`,
      );
    }
    if (create) {
      const file = await keyFileBesideStore(
        dir,
        AUDIT_KEY_FILE,
        () => `${generateNoteKey(newAuditKeyName()).signerKey}\n`,
      );
      return frozen(signerIn(file.content, file.path), 'beside-store', file.path, file.created);
    }
    const path = join(storeKeysDir(dir), AUDIT_KEY_FILE);
    const content = await readKeyFile(path, { missingOk: true });
    return content === null ? NONE : frozen(signerIn(content, path), 'beside-store', path, false);
  }
  if (/^postgres(ql)?:\/\//i.test(storeUrl)) return NONE;
  throw new EffectgateError(
    'EG_ERR_CONFIG_INVALID',
    `Unsupported store URL "${storeUrl.split(':')[0]}:…": use postgres://…, postgresql://…, pglite:<dir> or pglite:memory.`,
  );
}

/**
 * The verifier in a key file: a verifier key (public: any mode), or a signer key, whose verifier
 * is used (a secret: refused when others can read it; its group may, as the gate's own read).
 */
export async function readVerifierKey(path: string): Promise<NoteVerifier> {
  let content: Buffer;
  try {
    content = await readFile(path);
  } catch (err) {
    throw new EffectgateError('EG_ERR_CONFIG_INVALID', `Key file ${path}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  if (content.toString('utf8').trim().startsWith('PRIVATE+KEY+')) {
    // Read again through the checks of a secret file: its mode, on the file opened.
    const secret = (await readKeyFile(path, { groupReadable: true })) as Buffer;
    return parseVerifierKey(signerIn(secret, path).verifierKey);
  }
  try {
    return parseVerifierKey(content.toString('utf8'));
  } catch (err) {
    if (err instanceof SignedNoteError) throw new SignedNoteError(`Key file ${path}: ${err.message}`);
    throw err;
  }
}

/** A fresh key name: unique enough that two gates' keys never share a name and key ID. */
export function newAuditKeyName(): string {
  return `effectgate-audit-${randomBytes(8).toString('hex')}`;
}

const NONE: AuditKey = Object.freeze({ signer: null, source: 'none', path: null, created: false });

function frozen(
  signer: NoteSigner,
  source: AuditKey['source'],
  path: string | null,
  created: boolean,
): AuditKey {
  return Object.freeze({ signer, source, path, created });
}

/** The signer key in a file's bytes; a malformed one is refused naming the file. */
function signerIn(content: Buffer, path: string): NoteSigner {
  try {
    return parseSignerKey(content.toString('utf8'));
  } catch (err) {
    if (err instanceof SignedNoteError) throw new SignedNoteError(`Key file ${path}: ${err.message}`);
    throw err;
  }
}
