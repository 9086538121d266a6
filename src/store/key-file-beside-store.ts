import { randomBytes } from 'node:crypto';
import { link, mkdir, open, stat, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { EffectgateError } from '../errors.js';

/** A secret key file as read: where it is, its bytes, and whether this call made it. */
export interface StoreKeyFile {
  readonly path: string;
  readonly content: Buffer;
  /** True when this call generated and wrote the file; false when it was already there. */
  readonly created: boolean;
}

/**
 * The folder of an embedded store's secret key files: `DIR.keys`, a sibling of the store directory
 * `DIR`, never inside it. A copy of the store directory (a backup, a support bundle, a volume
 * snapshot of `DIR`) is what "a dump of the database" means for the embedded store, so a key kept
 * inside `DIR` would travel with the fingerprints it keys.
 */
export function storeKeysDir(storeDir: string): string {
  return `${storeDir.replace(/[/\\]+$/, '')}.keys`;
}

/**
 * A secret key file beside an embedded store: `storeKeysDir(storeDir)/fileName`, generated with
 * `generate` when absent, else read; readable by its owner only (created 0600 in a 0700 folder;
 * one another user can read or write is refused, naming its path).
 *
 * Creation is atomic and race-free: the bytes go to a temporary file, are flushed, and are linked
 * to the final name, which fails if it exists; so a reader never sees a partial file, and two
 * processes starting at once end with one key (the loser reads the winner's). `generate` may be
 * called by both; only one result is kept.
 *
 * One module for every key the gate keeps beside its store: the authority (HMAC) key
 * (`authority.key`, src/engine/authority-key.ts), and any later one, e.g. an audit signing key
 * (`keyFileBesideStore(dir, 'audit.key', () => pemOfNewEd25519Key())`). The caller validates the
 * content's format; this checks place, permissions and that the file is not empty.
 */
export async function keyFileBesideStore(
  storeDir: string,
  fileName: string,
  generate: () => Buffer | string | Promise<Buffer | string>,
): Promise<StoreKeyFile> {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(fileName) || basename(fileName) !== fileName) {
    throw new EffectgateError('EG_ERR_CONFIG_INVALID', `Not a key file name: ${JSON.stringify(fileName)}`);
  }
  const dir = storeKeysDir(storeDir);
  await ensureKeysDir(dir);
  const path = join(dir, fileName);
  const existing = await readKeyFile(path, { missingOk: true });
  if (existing !== null) return { path, content: existing, created: false };
  const generated = await generate();
  const content = typeof generated === 'string' ? Buffer.from(generated, 'utf8') : generated;
  if (await writeNewKeyFile(path, content)) return { path, content, created: true };
  // Another process linked its key first: that one is the key.
  return { path, content: (await readKeyFile(path)) as Buffer, created: false };
}

/**
 * Writes `content` to a new file `path`, mode 0600, all or nothing: to a temporary file beside it,
 * flushed, then linked to `path`, which fails if `path` exists (link(2), not rename(2), which would
 * replace a file another process linked first). `false`, and nothing changed, when it existed.
 */
export async function writeNewKeyFile(path: string, content: Buffer): Promise<boolean> {
  if (content.length === 0) throw new Error(`an empty key for ${path}`);
  const dir = dirname(path);
  const tmp = join(dir, `.${basename(path)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
  const handle = await open(tmp, 'wx', 0o600);
  let created = false;
  try {
    try {
      await handle.writeFile(content);
      await handle.sync();
    } finally {
      await handle.close();
    }
    try {
      await link(tmp, path);
      created = true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  } finally {
    await unlink(tmp).catch(() => undefined);
  }
  if (created) await syncDir(dir);
  return created;
}

/**
 * A secret key file's bytes, refusing one that others can read (`groupReadable`: its group may; a
 * Kubernetes Secret mounted with an `fsGroup` is 0440, group-readable by design, and the only way
 * a non-root container reads it) or that is empty. `missingOk`: `null` for a file that is not there.
 */
export async function readKeyFile(
  path: string,
  options: { readonly missingOk?: boolean; readonly groupReadable?: boolean } = {},
): Promise<Buffer | null> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(path, 'r');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && options.missingOk === true) return null;
    throw new EffectgateError('EG_ERR_CONFIG_INVALID', `Key file ${path}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  try {
    // The mode of the file opened, not of the path looked at a moment before.
    const info = await handle.stat();
    if (!info.isFile()) {
      throw new EffectgateError('EG_ERR_CONFIG_INVALID', `Key file ${path} is not a regular file.`);
    }
    const others = options.groupReadable === true ? 0o007 : 0o077;
    if (process.platform !== 'win32' && (info.mode & others) !== 0) {
      throw new EffectgateError(
        'EG_ERR_CONFIG_INVALID',
        `Key file ${path} is open to ${options.groupReadable === true ? 'other users' : 'its group or other users'} (mode ${modeOf(info.mode)}): it must be readable by its owner${options.groupReadable === true ? ' (and group)' : ''} only. Run: chmod ${options.groupReadable === true ? '640' : '600'} ${path}`,
      );
    }
    const content = await handle.readFile();
    if (content.length === 0) {
      throw new EffectgateError(
        'EG_ERR_CONFIG_INVALID',
        `Key file ${path} is empty: restore it from a backup, or remove it to have a new key made (credential fingerprints made with the old key then no longer match).`,
      );
    }
    return content;
  } finally {
    await handle.close();
  }
}

/** The keys folder, 0700; an existing one others may write to is refused (they could swap a key). */
async function ensureKeysDir(dir: string): Promise<void> {
  try {
    await mkdir(dir, { mode: 0o700 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') {
      throw new EffectgateError(
        'EG_ERR_CONFIG_INVALID',
        `Cannot make the key folder ${dir} beside the store: ${(err as Error).message}. Make it writable, or give the key from outside (for the authority key: --authority-key-file or EFFECTGATE_AUTHORITY_KEY).`,
        { cause: err },
      );
    }
  }
  const info = await stat(dir);
  if (!info.isDirectory()) {
    throw new EffectgateError('EG_ERR_CONFIG_INVALID', `Key folder ${dir} is not a directory.`);
  }
  if (process.platform !== 'win32' && (info.mode & 0o022) !== 0) {
    throw new EffectgateError(
      'EG_ERR_CONFIG_INVALID',
      `Key folder ${dir} is writable by its group or other users (mode ${modeOf(info.mode)}): run chmod 700 ${dir}`,
    );
  }
}

/** Makes the new directory entry durable (a crash right after must not lose the key). */
async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r').catch(() => null);
  if (handle === null) return;
  try {
    await handle.sync();
  } catch {
    // Some file systems refuse fsync on a directory; the file itself is flushed.
  } finally {
    await handle.close();
  }
}

function modeOf(mode: number): string {
  return `0${(mode & 0o777).toString(8).padStart(3, '0')}`;
}
