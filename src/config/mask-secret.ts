/**
 * How `--print-config` shows a secret: never its text. A URL keeps everything but its password
 * (`postgres://gate:***@db:5432/effectgate`), so an operator still sees which database it names.
 */
export const MASK = '***';

/**
 * The URL with the password of its user info, and any `password` / `sslpassword` query parameter,
 * replaced by `***`. Errs on the side of masking: the user info runs to the last `@` of the URL,
 * so a password with an unencoded `@` or `/` is masked whole too.
 */
export function maskUrl(url: string): string {
  const scheme = url.indexOf('://');
  let masked = url;
  if (scheme !== -1) {
    const start = scheme + 3;
    const at = url.lastIndexOf('@');
    const colon = url.indexOf(':', start);
    if (at > start && colon !== -1 && colon < at)
      masked = `${url.slice(0, colon + 1)}${MASK}${url.slice(at)}`;
  }
  return masked.replace(/([?&](?:ssl)?password=)[^&#]*/gi, `$1${MASK}`);
}

/** Whether `url` carries a password (in its user info or its query). */
export function hasUrlPassword(url: string): boolean {
  return maskUrl(url) !== url;
}
