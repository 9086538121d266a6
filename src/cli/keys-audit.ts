import { lstat, unlink, writeFile } from 'node:fs/promises';
import { EffectgateError } from '../errors.js';
import { generateNoteKey, newAuditKeyName, writeNewKeyFile } from '../store/index.js';
import { printable } from './cli-text.js';

/**
 * `effectgate keys audit --out FILE`: a new audit signing key in FILE (0600, never over a file)
 * and its verifier key in FILE.pub; the verifier key alone on stdout, so a script can hand it to a
 * witness, and what to do with them on stderr. Made here rather than by a gate so that every gate
 * of one PostgreSQL database can be given the same key, from outside the database.
 */
export async function writeAuditKey(out: string): Promise<number> {
  const pub = `${out}.pub`;
  // Both checked before either is written: a key whose verifier could not be written beside it
  // would be a key nobody can check against.
  for (const path of [out, pub]) {
    if (await exists(path)) {
      throw new EffectgateError(
        'EG_ERR_CONFIG_INVALID',
        `${path} exists: not replaced (a key file in use must not change; remove it first if it is not one).`,
      );
    }
  }
  const key = generateNoteKey(newAuditKeyName());
  const written = await writeNewKeyFile(out, Buffer.from(`${key.signerKey}\n`, 'utf8')).catch(
    (err: unknown) => {
      throw new EffectgateError('EG_ERR_CONFIG_INVALID', `${out}: ${(err as Error).message}`, { cause: err });
    },
  );
  if (!written) {
    throw new EffectgateError('EG_ERR_CONFIG_INVALID', `${out} exists: not replaced (made meanwhile).`);
  }
  try {
    // Public: readable by all, so witnesses and auditors can be given it as it is.
    await writeFile(pub, `${key.verifierKey}\n`, { flag: 'wx', mode: 0o644 });
  } catch (err) {
    // No gate can have used the new key yet: taken back, so the command can simply be run again.
    await unlink(out).catch(() => undefined);
    throw new EffectgateError('EG_ERR_CONFIG_INVALID', `${pub}: ${(err as Error).message}`, { cause: err });
  }
  process.stdout.write(`${key.verifierKey}\n`);
  process.stderr.write(
    `audit key written to ${printable(out)} (mode 0600) and its verifier key to ${printable(pub)}: start every gate of this database with --audit-key-file ${printable(out)} (or mount it as a Secret; never store it in the database), and give the verifier key to witnesses and to audit verify --audit-key-file\n`,
  );
  return 0;
}

async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw new EffectgateError('EG_ERR_CONFIG_INVALID', `${path}: ${(err as Error).message}`, { cause: err });
  }
}
