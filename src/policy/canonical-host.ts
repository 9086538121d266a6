import { isIP } from 'node:net';

/** Every character an IPv4 literal can be written with in the WHATWG forms (`0x7f.1`, `2130706433`). */
const IPV4_LIKE = /^[0-9a-fx.]+$/;
const MAPPED = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/;

/**
 * The one spelling of a host that tools and requests are compared in: lower case, no IPv6
 * brackets, no trailing dot, and every IP literal in its canonical form. IPv4 written as
 * `127.1`, `0x7f.0.0.1`, `017700000001` or `2130706433` becomes `127.0.0.1` (the WHATWG URL
 * parser's reading, which is what clients connect to); IPv6 is compressed and lower-cased
 * (`0:0:0:0:0:0:0:1` → `::1`); an IPv4-mapped IPv6 address (`::ffff:127.0.0.1`, `::ffff:7f00:1`)
 * becomes the IPv4 address it reaches on every dual-stack host. Without this, a tool on
 * `127.0.0.1` would be walked past by `http://[::ffff:127.0.0.1]:port/`.
 *
 * Names are left as they are (cheap: a regex test); only strings that can be an IP literal pay
 * for a URL parse.
 */
export function canonicalHost(host: string): string {
  let h = host.toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  else if (h.length > 1 && h.endsWith('.')) h = h.slice(0, -1);
  if (h.includes(':')) return isIP(h) === 6 ? canonicalIPv6(h) : h;
  if (IPV4_LIKE.test(h) && isIP(h) !== 4) {
    // `cafe.bad` passes the character test too: only take the parser's answer when it is an IPv4.
    const parsed = parseHostname(h);
    return parsed !== null && isIP(parsed) === 4 ? parsed : h;
  }
  return h;
}

/** True for a canonical IP literal (as `canonicalHost` returns it). */
export function isIpLiteral(host: string): boolean {
  return isIP(host) !== 0;
}

function canonicalIPv6(address: string): string {
  const parsed = parseHostname(`[${address}]`);
  if (parsed === null) return address;
  const v6 = parsed.slice(1, -1);
  const mapped = MAPPED.exec(v6);
  if (mapped === null) return v6;
  const hi = Number.parseInt(mapped[1]!, 16);
  const lo = Number.parseInt(mapped[2]!, 16);
  return `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
}

function parseHostname(host: string): string | null {
  try {
    return new URL(`http://${host}/`).hostname;
  } catch {
    return null;
  }
}
