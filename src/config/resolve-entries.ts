/**
 * `--resolve HOST:PORT=ADDRESS:PORT`, as curl's `--resolve` (plus a port of its own, as its
 * `--connect-to`): the gate dials ADDRESS:PORT wherever it would dial HOST:PORT, and everything else
 * stays HOST's: the policies that match it, the `Host` header, the TLS name it verifies, the trail.
 * For trying shipped policies against a local stand-in without editing them. Only what an operator
 * gives (a flag or the config file, never the environment); ADDRESS is an IP literal, so no name
 * lookup can move it again.
 */
import { isIP } from 'node:net';
import { EffectgateError } from '../errors.js';

/** One `--resolve` entry: `host:port` is dialled at `address:addressPort`. */
export interface ResolveEntry {
  /** Canonical (lower case, punycode; IPv6 without brackets), as the proxy sees request hosts. */
  readonly host: string;
  readonly port: number;
  /** An IP literal (IPv6 without brackets). */
  readonly address: string;
  readonly addressPort: number;
}

/**
 * Parses a comma-separated list of entries (a repeated flag's values joined, or a config file's
 * list). `where` names the setting as it was given (`--resolve`, `file:4:10: resolve`).
 */
export function parseResolveEntries(where: string, text: string): readonly ResolveEntry[] {
  const entries: ResolveEntry[] = [];
  const seen = new Set<string>();
  for (const raw of text.split(',')) {
    const item = raw.trim();
    const bad = (why: string): EffectgateError =>
      new EffectgateError(
        'EG_ERR_CONFIG_INVALID',
        `${where}: ${JSON.stringify(item)} ${why}; write HOST:PORT=ADDRESS:PORT, e.g. api.stripe.com:443=127.0.0.1:12111`,
      );
    const eq = item.indexOf('=');
    if (eq === -1) throw bad('has no =');
    const from = splitAuthority(item.slice(0, eq));
    const to = splitAuthority(item.slice(eq + 1));
    if (from === null) throw bad('does not start with HOST:PORT');
    if (to === null) throw bad('does not end with ADDRESS:PORT');
    const host = canonicalName(from.host);
    if (host === null) throw bad(`names no host (${JSON.stringify(from.host)})`);
    if (isIP(to.host) === 0) throw bad(`sends it to ${JSON.stringify(to.host)}, which is not an IP address`);
    const key = `${host}:${from.port}`;
    if (seen.has(key)) throw bad(`gives ${key} a second time`);
    seen.add(key);
    entries.push(Object.freeze({ host, port: from.port, address: to.host, addressPort: to.port }));
  }
  return Object.freeze(entries);
}

/** `host:port` or `[v6]:port`; `null` when it is neither or the port is not 1–65535. */
function splitAuthority(text: string): { host: string; port: number } | null {
  const m = /^\[([^\]]+)\]:(\d{1,5})$/.exec(text) ?? /^([^:[\]]+):(\d{1,5})$/.exec(text);
  if (m === null) return null;
  const port = Number(m[2]);
  if (!(port >= 1 && port <= 65535)) return null;
  const host = m[1]!;
  if (text.startsWith('[') && isIP(host) !== 6) return null;
  return { host, port };
}

/** The host as the WHATWG URL parser spells it (how the proxy sees request hosts), or `null`. */
function canonicalName(host: string): string | null {
  if (isIP(host) === 6) return new URL(`http://[${host}]/`).hostname.slice(1, -1);
  if (host.includes('*')) return null;
  try {
    const name = new URL(`http://${host}/`).hostname;
    return name === '' ? null : name.replace(/\.$/, '');
  } catch {
    return null;
  }
}
