/**
 * Sessions of the admin pages. Logging in with the admin token sets `eg_session`: a random session
 * id, its expiry and an HMAC-SHA256 of both keyed by the admin token. The cookie never holds the
 * token, and it stops verifying as soon as the token changes (rotating the token logs everyone
 * out). Every form carries a CSRF token: an HMAC of the session cookie value, keyed by the token.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { sameSecret } from '../admin-auth.js';

export const SESSION_COOKIE = 'eg_session';
/** How long a session lasts after logging in. */
export const SESSION_TTL_SECONDS = 12 * 60 * 60;

/** Session ids logged out in this process, until their expiry (seconds). */
const loggedOut = new Map<string, number>();
const MAX_LOGGED_OUT = 10_000;

const SESSION_FORMAT = /^([A-Za-z0-9_-]{22})\.(\d{1,12})\.([A-Za-z0-9_-]{43})$/;

function mac(token: string, purpose: string, value: string): Buffer {
  return createHmac('sha256', token).update(`effectgate-ui:${purpose}\n${value}`, 'utf8').digest();
}

function nowSeconds(now: number): number {
  return Math.floor(now / 1000);
}

/** A new session cookie value: `<session id>.<expiry, unix seconds>.<HMAC>`. */
export function newSession(token: string, now: number = Date.now()): string {
  const sid = randomBytes(16).toString('base64url');
  const exp = nowSeconds(now) + SESSION_TTL_SECONDS;
  return `${sid}.${exp}.${mac(token, 'session', `${sid}.${exp}`).toString('base64url')}`;
}

/** Whether `value` is a session this token issued, not expired and not logged out. */
export function verifySession(value: string | undefined, token: string, now: number = Date.now()): boolean {
  if (value === undefined) return false;
  const m = SESSION_FORMAT.exec(value);
  if (m === null) return false;
  const sid = m[1]!;
  const exp = m[2]!;
  // Compared as text (both 43 characters), so only the canonical encoding of the MAC verifies.
  const expected = Buffer.from(mac(token, 'session', `${sid}.${exp}`).toString('base64url'), 'latin1');
  if (!timingSafeEqual(Buffer.from(m[3]!, 'latin1'), expected)) return false;
  if (Number(exp) <= nowSeconds(now)) return false;
  return !loggedOut.has(sid);
}

/** Ends a session in this process (the browser's cookie is cleared by the response). */
export function endSession(value: string | undefined, now: number = Date.now()): void {
  const m = value === undefined ? null : SESSION_FORMAT.exec(value);
  if (m === null) return;
  const t = nowSeconds(now);
  if (loggedOut.size >= MAX_LOGGED_OUT) {
    for (const [sid, exp] of loggedOut) if (exp <= t) loggedOut.delete(sid);
    // Still full of live sessions: forget the oldest entries (they expire within the TTL anyway).
    for (const sid of loggedOut.keys()) {
      if (loggedOut.size < MAX_LOGGED_OUT) break;
      loggedOut.delete(sid);
    }
  }
  loggedOut.set(m[1]!, Number(m[2]));
}

/** The CSRF token of a session (or of a bearer-authenticated request: `identity` = "bearer"). */
export function csrfToken(token: string, identity: string): string {
  return mac(token, 'csrf', identity).toString('base64url');
}

export function verifyCsrf(given: string | undefined, token: string, identity: string): boolean {
  if (given === undefined) return false;
  return sameSecret(given, csrfToken(token, identity));
}

/** The value of one cookie from a `Cookie` header (the first when repeated), if present. */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq === -1) continue;
    if (part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** `Set-Cookie` for a session (empty value and `Max-Age=0` to clear it). */
export function sessionCookie(value: string | null, secure: boolean): string {
  const attrs = [
    `${SESSION_COOKIE}=${value ?? ''}`,
    'HttpOnly',
    'SameSite=Strict',
    'Path=/ui',
    `Max-Age=${value === null ? 0 : SESSION_TTL_SECONDS}`,
  ];
  if (secure) attrs.push('Secure');
  return attrs.join('; ');
}
