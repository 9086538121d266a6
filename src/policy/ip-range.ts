import { isIP } from 'node:net';
import { canonicalHost } from './canonical-host.js';

/** An IP address as a number in its family: what range checks compare. */
export interface IpAddress {
  readonly family: 4 | 6;
  readonly value: bigint;
}

/**
 * A CIDR block (`10.0.0.0/8`, `fe80::/10`; a bare address is a `/32` or `/128`). IPv4-mapped IPv6
 * addresses (`::ffff:169.254.169.254`) are read as the IPv4 address they reach on every
 * dual-stack host, so a mapped spelling never walks past an IPv4 range.
 */
export class IpRange {
  readonly text: string;
  readonly family: 4 | 6;
  readonly #network: bigint;
  readonly #prefix: number;

  private constructor(text: string, family: 4 | 6, network: bigint, prefix: number) {
    this.text = text;
    this.family = family;
    this.#network = network;
    this.#prefix = prefix;
  }

  /** Parses `address/prefix` (or a bare address); a reason string when it is not one. */
  static parse(text: string): IpRange | string {
    const slash = text.indexOf('/');
    const addressText = slash === -1 ? text : text.slice(0, slash);
    const address = parseIp(addressText);
    if (address === null) return `${JSON.stringify(addressText)} is not an IPv4 or IPv6 address`;
    // A mapped IPv6 block is the IPv4 block it spells (`::ffff:10.0.0.0/104` is `10.0.0.0/8`).
    const mappedShift = address.family === 4 && addressText.includes(':') ? 96 : 0;
    const bits = address.family === 4 ? 32 : 128;
    const written = bits + mappedShift;
    const prefixText = slash === -1 ? String(written) : text.slice(slash + 1);
    if (!/^[0-9]{1,3}$/.test(prefixText) || Number(prefixText) > written) {
      return `prefix length must be an integer from 0 to ${written}, got ${JSON.stringify(prefixText)}`;
    }
    const prefix = Number(prefixText) - mappedShift;
    if (prefix < 0) return `${JSON.stringify(text)} covers more than the IPv4-mapped range it names`;
    const hostBits = BigInt(bits - prefix);
    const network = (address.value >> hostBits) << hostBits;
    if (network !== address.value) {
      return `${JSON.stringify(text)} has host bits set; write the network address (${formatIp({ family: address.family, value: network })}/${prefix})`;
    }
    return new IpRange(text, address.family, network, prefix);
  }

  contains(address: IpAddress): boolean {
    if (address.family !== this.family) return false;
    const hostBits = BigInt((this.family === 4 ? 32 : 128) - this.#prefix);
    return address.value >> hostBits === this.#network >> hostBits;
  }
}

/** Parses an IP literal (brackets and IPv4-mapped spellings accepted); `null` for anything else. */
export function parseIp(text: string): IpAddress | null {
  const canonical = canonicalHost(text);
  const family = isIP(canonical);
  if (family === 4) {
    const value = canonical.split('.').reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
    return { family: 4, value };
  }
  if (family === 6) return { family: 6, value: ipv6Value(canonical) };
  return null;
}

export function formatIp(address: IpAddress): string {
  if (address.family === 4) {
    const v = Number(address.value);
    return [v >>> 24, (v >>> 16) & 0xff, (v >>> 8) & 0xff, v & 0xff].join('.');
  }
  const groups: string[] = [];
  for (let i = 7; i >= 0; i -= 1) groups.push(((address.value >> BigInt(i * 16)) & 0xffffn).toString(16));
  return canonicalHost(groups.join(':'));
}

/** `::1` → 1n; the input is a canonical IPv6 literal (possibly with an embedded IPv4 tail). */
function ipv6Value(address: string): bigint {
  let text = address;
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (tail !== null) {
    const v4 = parseIp(tail[1]!);
    const v = Number(v4?.value ?? 0n);
    text = `${text.slice(0, tail.index)}${(v >>> 16).toString(16)}:${(v & 0xffff).toString(16)}`;
  }
  const [head = '', rest] = text.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = rest === undefined || rest === '' ? [] : rest.split(':');
  const groups =
    rest === undefined
      ? left
      : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return groups.reduce((acc, g) => (acc << 16n) | BigInt(Number.parseInt(g, 16)), 0n);
}
