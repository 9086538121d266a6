/**
 * Bearer authentication of the admin API (`/api/*`). The token comes from
 * `EFFECTGATE_ADMIN_TOKEN` or `--admin-token-file`; it is compared in constant time and is never
 * logged, echoed or stored.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { EffectgateError } from '../errors.js';

export type AdminAuthResult = 'ok' | 'unconfigured' | 'missing' | 'wrong';

/** Environment variable holding the admin API bearer token. */
export const ADMIN_TOKEN_ENV = 'EFFECTGATE_ADMIN_TOKEN';

const BEARER = /^Bearer[ \t]+([^\s]+)[ \t]*$/i;

/**
 * Checks an `Authorization` header against the configured token. Both sides are hashed with
 * SHA-256 first, so `timingSafeEqual` compares equal lengths and the comparison time says nothing
 * about the token, not even its length.
 */
export function checkAdminAuth(
  authorization: string | string[] | undefined,
  token: string | null,
): AdminAuthResult {
  if (token === null || token === '') return 'unconfigured';
  if (typeof authorization !== 'string') return 'missing';
  const m = BEARER.exec(authorization);
  if (m === null) return 'missing';
  return sameSecret(m[1]!, token) ? 'ok' : 'wrong';
}

/**
 * Constant-time comparison of two secrets: both are hashed first, so the comparison takes the same
 * time whatever their lengths and contents. Used by the API and the UI's login and CSRF checks.
 */
export function sameSecret(a: string, b: string): boolean {
  return timingSafeEqual(sha256(a), sha256(b));
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/**
 * The admin token: the first line of `--admin-token-file` when given, else `EFFECTGATE_ADMIN_TOKEN`,
 * else `null` (the API then answers 401 saying how to set one). A named file that cannot be read or
 * holds no token is a configuration error, never a silent "no token".
 */
export async function resolveAdminToken(
  options: { readonly file?: string | undefined; readonly env?: NodeJS.ProcessEnv } = {},
): Promise<string | null> {
  if (options.file !== undefined) {
    let text: string;
    try {
      text = await readFile(options.file, 'utf8');
    } catch (err) {
      throw new EffectgateError(
        'EG_ERR_CONFIG_INVALID',
        `--admin-token-file ${options.file}: ${(err as NodeJS.ErrnoException).code ?? 'cannot be read'}`,
        { cause: err },
      );
    }
    const token = (text.split(/\r?\n/, 1)[0] ?? '').trim();
    if (!isUsableToken(token)) {
      throw new EffectgateError(
        'EG_ERR_CONFIG_INVALID',
        `--admin-token-file ${options.file}: the first line must hold the token (printable, no spaces)`,
      );
    }
    return token;
  }
  const fromEnv = (options.env ?? process.env)[ADMIN_TOKEN_ENV]?.trim();
  if (fromEnv === undefined || fromEnv === '') return null;
  if (!isUsableToken(fromEnv)) {
    throw new EffectgateError(
      'EG_ERR_CONFIG_INVALID',
      `${ADMIN_TOKEN_ENV} must be printable without spaces (it is sent as "Authorization: Bearer <token>")`,
    );
  }
  return fromEnv;
}

function isUsableToken(token: string): boolean {
  return /^[\x21-\x7e]+$/.test(token);
}
