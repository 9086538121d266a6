import { chmod, mkdir, mkdtemp, realpath, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EffectgateError } from '../../../src/errors.js';
import {
  AUDIT_KEY_FILE,
  chooseAuditKey,
  newAuditKeyName,
  readVerifierKey,
} from '../../../src/store/audit-key.js';
import { generateNoteKey, isNoteName, SignedNoteError } from '../../../src/store/signed-note.js';

const POSTGRES = 'postgres://postgres@127.0.0.1:5432/test';

/** Writes `content` to `name` in `dir` with exactly `mode` (whatever the umask). */
async function keyFile(dir: string, name: string, content: string, mode: number): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, content, { mode });
  await chmod(path, mode);
  return path;
}

async function refusal(promise: Promise<unknown>): Promise<EffectgateError> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(EffectgateError);
  return err as EffectgateError;
}

describe('chooseAuditKey', () => {
  let tmp: string;
  beforeEach(async () => {
    tmp = await realpath(await mkdtemp(join(tmpdir(), 'eg-audit-key-')));
  });
  afterEach(async () => {
    await rm(tmp, { recursive: true, force: true });
  });

  it('reads a given signer key file, whatever the store', async () => {
    const { signerKey, verifierKey } = generateNoteKey('example.com/audit');
    const path = await keyFile(tmp, 'audit.key', `${signerKey}\n`, 0o600);
    for (const storeUrl of [POSTGRES, 'pglite:memory', `pglite:${tmp}`]) {
      const key = await chooseAuditKey({ keyFile: path, storeUrl, create: true });
      expect(key).toMatchObject({ source: 'file', path, created: false });
      expect(key.signer?.verifierKey).toBe(verifierKey);
    }
  });

  it('makes a key beside an embedded store, owner-only, and reads the same one back', async () => {
    const dir = join(tmp, 'store');
    await mkdir(dir);
    const made = await chooseAuditKey({ storeUrl: `pglite:${dir}`, create: true });
    const path = join(`${dir}.keys`, AUDIT_KEY_FILE);
    expect(made).toMatchObject({ source: 'beside-store', path, created: true });
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect((await stat(`${dir}.keys`)).mode & 0o777).toBe(0o700);
    expect(made.signer?.name).toMatch(/^effectgate-audit-/);

    for (const create of [true, false]) {
      const again = await chooseAuditKey({ storeUrl: `pglite:${dir}/`, create });
      expect(again).toMatchObject({ source: 'beside-store', path, created: false });
      expect(again.signer?.verifierKey).toBe(made.signer?.verifierKey);
    }
  });

  it('has no key beside an embedded store that has none, unless asked to make one', async () => {
    const dir = join(tmp, 'store');
    await mkdir(dir);
    expect(await chooseAuditKey({ storeUrl: `pglite:${dir}`, create: false })).toEqual({
      signer: null,
      source: 'none',
      path: null,
      created: false,
    });
    // No store there at all: nothing to read, and nothing made beside it.
    const missing = join(tmp, 'missing');
    expect((await chooseAuditKey({ storeUrl: `pglite:${missing}`, create: false })).source).toBe('none');
    expect((await refusal(chooseAuditKey({ storeUrl: `pglite:${missing}`, create: true }))).code).toBe(
      'EG_ERR_STORE_MISSING',
    );
    await expect(stat(`${missing}.keys`)).rejects.toThrow();
  });

  it('makes a key of its own for each in-memory store', async () => {
    const a = await chooseAuditKey({ storeUrl: 'pglite:memory', create: true });
    const b = await chooseAuditKey({ storeUrl: 'pglite:memory', create: false });
    expect(a).toMatchObject({ source: 'ephemeral', path: null, created: true });
    expect(a.signer).not.toBeNull();
    expect(b.signer?.verifierKey).not.toBe(a.signer?.verifierKey);
  });

  it('has no key for PostgreSQL unless one is given', async () => {
    for (const create of [true, false]) {
      expect(await chooseAuditKey({ storeUrl: POSTGRES, create })).toEqual({
        signer: null,
        source: 'none',
        path: null,
        created: false,
      });
    }
    expect((await refusal(chooseAuditKey({ storeUrl: 'mysql://x', create: true }))).code).toBe(
      'EG_ERR_CONFIG_INVALID',
    );
  });

  it('refuses a key file that holds no signer key, naming it', async () => {
    for (const content of [
      'not a key\n',
      `${generateNoteKey('a').verifierKey}\n`,
      `${generateNoteKey('a').signerKey}x\n`,
    ]) {
      const path = await keyFile(tmp, 'bad.key', content, 0o600);
      const err = await refusal(chooseAuditKey({ keyFile: path, storeUrl: POSTGRES, create: true }));
      expect(err).toBeInstanceOf(SignedNoteError);
      expect(err.code).toBe('EG_ERR_AUDIT_KEY_INVALID');
      expect(err.message).toContain(path);
    }
    const missing = await refusal(
      chooseAuditKey({ keyFile: join(tmp, 'none.key'), storeUrl: POSTGRES, create: true }),
    );
    expect(missing.message).toContain(join(tmp, 'none.key'));
  });

  it('reads a signer key file its group can read (a Secret mounted with an fsGroup: 0440)', async () => {
    const { signerKey, verifierKey } = generateNoteKey('a');
    for (const mode of [0o440, 0o640]) {
      const path = await keyFile(tmp, `audit-${mode.toString(8)}.key`, `${signerKey}\n`, mode);
      const key = await chooseAuditKey({ keyFile: path, storeUrl: POSTGRES, create: true });
      expect(key).toMatchObject({ source: 'file', path });
      expect(key.signer?.verifierKey).toBe(verifierKey);
    }
  });

  it('refuses a signer key file other users can read', async () => {
    for (const mode of [0o444, 0o604]) {
      const path = await keyFile(tmp, 'audit.key', `${generateNoteKey('a').signerKey}\n`, mode);
      const err = await refusal(chooseAuditKey({ keyFile: path, storeUrl: POSTGRES, create: true }));
      expect(err.code).toBe('EG_ERR_CONFIG_INVALID');
      expect(err.message).toContain(path);
      expect(err.message).toContain('chmod 640');
    }
  });
});

describe('readVerifierKey', () => {
  let tmp: string;
  beforeEach(async () => {
    tmp = await realpath(await mkdtemp(join(tmpdir(), 'eg-audit-vkey-')));
  });
  afterEach(async () => {
    await rm(tmp, { recursive: true, force: true });
  });

  it('reads a verifier key file anyone may read, or the verifier of an owner-only signer key file', async () => {
    const { signerKey, verifierKey } = generateNoteKey('example.com/audit');
    const pub = await keyFile(tmp, 'audit.pub', `${verifierKey}\n`, 0o644);
    expect((await readVerifierKey(pub)).verifierKey).toBe(verifierKey);
    const secret = await keyFile(tmp, 'audit.key', `${signerKey}\n`, 0o600);
    expect((await readVerifierKey(secret)).verifierKey).toBe(verifierKey);
    // The mounted Secret the gate reads (0440 with an fsGroup) verifies too.
    const mounted = await keyFile(tmp, 'mounted.key', `${signerKey}\n`, 0o440);
    expect((await readVerifierKey(mounted)).verifierKey).toBe(verifierKey);
  });

  it('refuses a signer key file others can read, a malformed key and a missing file, naming the file', async () => {
    const secret = await keyFile(tmp, 'audit.key', `${generateNoteKey('a').signerKey}\n`, 0o644);
    expect((await refusal(readVerifierKey(secret))).message).toContain(secret);
    const bad = await keyFile(tmp, 'bad.pub', 'a+00000000+AQ==\n', 0o644);
    const err = await refusal(readVerifierKey(bad));
    expect(err.code).toBe('EG_ERR_AUDIT_KEY_INVALID');
    expect(err.message).toContain(bad);
    expect((await refusal(readVerifierKey(join(tmp, 'none.pub')))).message).toContain(join(tmp, 'none.pub'));
  });
});

describe('newAuditKeyName', () => {
  it('is a valid note key name, a new one each time', () => {
    const names = Array.from({ length: 100 }, () => newAuditKeyName());
    for (const name of names) expect(isNoteName(name)).toBe(true);
    expect(new Set(names).size).toBe(names.length);
  });
});
