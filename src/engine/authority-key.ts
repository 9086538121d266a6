import { randomBytes } from 'node:crypto';
import { EffectgateError } from '../errors.js';
import {
  type EngineStore,
  keyFileBesideStore,
  type StoredAuthorityKey,
  type StoreHandle,
} from '../store/index.js';

/** The authority key's settling reads and drops the key a store kept, and needs to know which store. */
type KeyedStore = Pick<EngineStore, 'storedAuthorityKey' | 'dropStoredAuthorityKey'> &
  Pick<StoreHandle, 'kind' | 'dir'>;

import type { GateLogger } from './gate.js';

/** The authority key's file beside an embedded store at DIR: `DIR.keys/authority.key`. */
export const AUTHORITY_KEY_FILE = 'authority.key';

/** The one-line command that writes a PostgreSQL store's key (or a new one) to a file. */
export const EXPORT_AUTHORITY_KEY =
  'effectgate keys authority --store <the store URL, default DATABASE_URL> --out authority.key';

/** The shortest key accepted, from a file, the environment or the store: 32 characters. */
export const MIN_AUTHORITY_KEY_LENGTH = 32;

export interface AuthorityKeyOptions {
  readonly store: KeyedStore;
  /**
   * The key the caller gave (`createGate({ authorityKey })`, `--authority-key-file`,
   * `EFFECTGATE_AUTHORITY_KEY`); `null`: no fingerprints, only which header carried a credential;
   * `undefined`: none given, so the store's default applies.
   */
  readonly configured: string | null | undefined;
  readonly logger: GateLogger;
}

/**
 * The HMAC key of credential fingerprints, never one the database alone holds:
 *
 * - given: that key;
 * - an embedded store on disk (`pglite:DIR`): `DIR.keys/authority.key`, made at first start (32
 *   random bytes as hex) or, on a store an older version keyed fingerprints in, the key it kept in
 *   `settings`, moved out: written to the file first, then deleted from the store, so a crash
 *   between the two finds both and finishes the move;
 * - `pglite:memory`: the store's own key; that database lives in this process's memory only;
 * - PostgreSQL: refused. Gates sharing one database must share one key, which only the operator
 *   can hand to all of them (a Secret mounted as a file); a store that still holds an older
 *   version's key is told how to export it, never used from the database (docs/security.md).
 *
 * A key kept in `settings` that the trail never used (migration 0002 makes one per store) is
 * deleted; one that keyed fingerprints and differs from the key in use is kept, with a warning.
 */
export async function resolveAuthorityKey(options: AuthorityKeyOptions): Promise<string | null> {
  const { store, configured, logger } = options;
  if (configured === null) return null;
  const stored = await store.storedAuthorityKey();
  if (configured !== undefined) {
    await settleStoredKey(store, stored, configured, logger);
    return configured;
  }
  if (store.dir !== null) {
    const file = await keyFileBesideStore(store.dir, AUTHORITY_KEY_FILE, () =>
      // Fingerprints in the trail were keyed with the stored key: approvals and retries compare
      // them across attempts, so the same key must stay in use.
      stored?.keyed === true ? `${stored.key}\n` : `${randomBytes(32).toString('hex')}\n`,
    );
    const key = authorityKeyOf(file.content.toString('utf8'), file.path);
    if (file.created) {
      logger.info(
        { path: file.path },
        stored?.keyed === true && stored.key === key
          ? 'authority key moved out of the store into its key file'
          : 'authority key made: a key file beside the store',
      );
    }
    await settleStoredKey(store, stored, key, logger);
    return key;
  }
  if (store.kind === 'pglite') return stored?.key ?? randomBytes(32).toString('hex');
  throw new EffectgateError(
    'EG_ERR_CONFIG_INVALID',
    stored?.keyed === true
      ? `This PostgreSQL store still holds the authority key an older version kept in the database, and its trail's credential fingerprints were made with it. Export it once: ${EXPORT_AUTHORITY_KEY}; then start every gate with --authority-key-file authority.key (or EFFECTGATE_AUTHORITY_KEY); the first gate started with it deletes it from the database (docs/security.md).`
      : `A gate on PostgreSQL needs the authority key (the HMAC key of credential fingerprints) from outside the database, the same for every gate: make one with ${EXPORT_AUTHORITY_KEY} (or openssl rand -hex 32 > authority.key), then give it with --authority-key-file authority.key or EFFECTGATE_AUTHORITY_KEY (docs/security.md). In process: createGate({ authorityKey }).`,
  );
}

/**
 * The key in a key file's text: its first line, trimmed, at least 32 characters. A short one is a
 * dictionary away from a database dump, wherever it came from.
 */
export function authorityKeyOf(text: string, where: string): string {
  const key = text.split(/\r?\n/, 1)[0]?.trim() ?? '';
  if (key.length < MIN_AUTHORITY_KEY_LENGTH) {
    throw new EffectgateError(
      'EG_ERR_CONFIG_INVALID',
      `${where}: the key must be at least ${MIN_AUTHORITY_KEY_LENGTH} characters (e.g. openssl rand -hex 32)`,
    );
  }
  return key;
}

/** The key left in `settings`: gone once it is the key in use, or when nothing was keyed with it. */
async function settleStoredKey(
  store: KeyedStore,
  stored: StoredAuthorityKey | null,
  key: string,
  logger: GateLogger,
): Promise<void> {
  if (stored === null) return;
  if (stored.key === key || !stored.keyed) {
    await store.dropStoredAuthorityKey(stored.key);
    return;
  }
  // Still unsafe: a copy of the database can test guesses against the fingerprints made with it.
  logger.warn(
    {},
    `the store still holds the authority key its earlier credential fingerprints were made with, and this gate uses another one: those credentials now read as changed, and a copy of the database can test guessed credentials against the earlier fingerprints. To keep them comparable, export it (${EXPORT_AUTHORITY_KEY}) and give every gate that file; the gate then deletes it from the database. If the key was changed on purpose, delete it: delete from settings where name = 'authority_key'`,
  );
}
