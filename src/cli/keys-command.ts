import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { AUTHORITY_KEY_FILE } from '../engine/index.js';
import { EffectgateError } from '../errors.js';
import {
  embeddedStoreDir,
  openStore,
  resolveStoreUrl,
  storeKeysDir,
  writeNewKeyFile,
} from '../store/index.js';
import { writeAuditKey } from './keys-audit.js';
import { type FlagTable, parseFlags, UsageError } from './parse-flags.js';

export const USAGE = `usage: effectgate keys authority --out FILE [--store postgres://…]
       writes the authority key of a PostgreSQL store to FILE (mode 0600, never over an existing
       file): the key an older version kept in the database when its trail holds fingerprints made
       with it, else a new random one. Give FILE to every gate (the proxy's authority-key-file
       setting); the first one deletes the key from the database. An embedded store keeps its key
       beside itself, in DIR.keys/.
       effectgate keys audit --out FILE
       writes a new audit signing key to FILE (mode 0600, never over an existing file) and its
       verifier key to FILE.pub, and prints the verifier key. Give FILE to every gate of one
       database (the proxy's audit-key-file setting), outside the database; give the verifier key
       to witnesses and to audit verify (its audit-key-file flag).
defaults: --store DATABASE_URL`;

export const KEYS_OPTIONS = {
  store: { type: 'string' },
  out: { type: 'string' },
} as const satisfies FlagTable;

/**
 * `effectgate keys authority --out FILE`: the one step of moving a PostgreSQL store's authority key
 * out of the database (docs/security.md), and of making a key for a new one. The database's copy
 * is left for the gate to delete once it runs with this file, so the key is never only in a file
 * that was not put in place yet.
 */
export async function runKeys(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub !== 'authority' && sub !== 'audit') {
    process.stderr.write(`effectgate: unknown keys command ${JSON.stringify(sub ?? '')}\n${USAGE}\n`);
    return 2;
  }
  const { values } = parseFlags({ args: [...rest], options: KEYS_OPTIONS }, USAGE);
  if (values.out === undefined || values.out === '') {
    throw new EffectgateError('EG_ERR_CONFIG_INVALID', `keys ${sub} needs --out FILE (${USAGE}).`);
  }
  if (sub === 'audit') {
    if (values.store !== undefined) {
      // The audit key is never the database's: there is nothing in a store to read or export.
      throw new UsageError(
        'keys audit takes no --store: the audit key is made, never read from a store',
        USAGE,
      );
    }
    return writeAuditKey(values.out);
  }
  const url = resolveStoreUrl(values.store);
  if (url.startsWith('pglite:')) {
    // The store may not exist yet: its key file would be made beside where it will be.
    const location = url.slice('pglite:'.length);
    const dir =
      embeddedStoreDir(url) ?? (location === 'memory' || location === '' ? null : resolve(location));
    throw new EffectgateError(
      'EG_ERR_CONFIG_INVALID',
      `An embedded store keeps its authority key beside it, in ${dir === null ? 'DIR.keys' : storeKeysDir(dir)}/${AUTHORITY_KEY_FILE} (a gate moves an older store's key there at its next start): nothing to export. Name a PostgreSQL store with --store postgres://… or DATABASE_URL.`,
    );
  }
  const store = await openStore({ url, migrate: false, requireExisting: true });
  let stored: Awaited<ReturnType<typeof store.storedAuthorityKey>>;
  try {
    stored = await store.storedAuthorityKey();
  } finally {
    await store.close();
  }
  const key = stored?.keyed === true ? stored.key : randomBytes(32).toString('hex');
  const out = values.out;
  const written = await writeNewKeyFile(out, Buffer.from(`${key}\n`, 'utf8')).catch((err: unknown) => {
    throw new EffectgateError('EG_ERR_CONFIG_INVALID', `${out}: ${(err as Error).message}`, { cause: err });
  });
  if (!written) {
    throw new EffectgateError(
      'EG_ERR_CONFIG_INVALID',
      `${values.out} exists: not replaced (a key file in use must not change; remove it first if it is not one).`,
    );
  }
  process.stdout.write(
    `authority key written to ${values.out} (${stored?.keyed === true ? "the key this store's fingerprints were made with; the first gate started with it deletes it from the database" : 'a new random key'}): start every gate with --authority-key-file ${values.out}, or mount it as a Secret\n`,
  );
  return 0;
}
