import { canonicalHost } from './canonical-host.js';
import { IpRange, parseIp } from './ip-range.js';
import type { EgressClass, EgressDestination, EgressPolicy } from './types.js';

/**
 * The address classes of `egress.deny` (docs/design.md §4.1). `gate` has no fixed ranges: it is the
 * gate's own listeners, known only once they are bound (`isGateListener`).
 */
export const EGRESS_CLASS_RANGES: Readonly<Record<Exclude<EgressClass, 'gate'>, readonly IpRange[]>> =
  Object.freeze({
    // Cloud metadata lives here: 169.254.169.254 everywhere, fd00:ec2::254 on AWS over IPv6.
    link_local: ranges('169.254.0.0/16', 'fe80::/10', 'fd00:ec2::254/128'),
    loopback: ranges('127.0.0.0/8', '::1/128'),
    private: ranges('10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', 'fc00::/7'),
  });

export const EGRESS_CLASSES: readonly EgressClass[] = Object.freeze([
  'link_local',
  'loopback',
  'private',
  'gate',
]);

/** One `deny` entry: a class or a CIDR. */
export type EgressDenyRule =
  | { readonly kind: 'class'; readonly name: EgressClass }
  | { readonly kind: 'range'; readonly range: IpRange };

/** One `allow` entry: a CIDR, or an exact host name exempt whatever it resolves to. */
export type EgressAllowRule =
  | { readonly kind: 'range'; readonly range: IpRange }
  | { readonly kind: 'host'; readonly name: string };

/** What an absent `egress` block means: cloud metadata and the gate itself are never reached. */
export const DEFAULT_EGRESS_DENY: readonly EgressDenyRule[] = Object.freeze([
  { kind: 'class', name: 'link_local' },
  { kind: 'class', name: 'gate' },
]);

export function compileEgress(
  deny: readonly EgressDenyRule[],
  allow: readonly EgressAllowRule[],
): EgressPolicy {
  return new CompiledEgress(deny, allow);
}

class CompiledEgress implements EgressPolicy {
  readonly deny: readonly string[];
  readonly allow: readonly string[];
  readonly #deny: readonly EgressDenyRule[];
  readonly #allowRanges: readonly IpRange[];
  readonly #allowHosts: ReadonlySet<string>;

  constructor(deny: readonly EgressDenyRule[], allow: readonly EgressAllowRule[]) {
    this.#deny = Object.freeze([...deny]);
    this.deny = Object.freeze(deny.map((d) => (d.kind === 'class' ? d.name : d.range.text)));
    this.allow = Object.freeze(allow.map((a) => (a.kind === 'host' ? a.name : a.range.text)));
    this.#allowRanges = Object.freeze(allow.flatMap((a) => (a.kind === 'range' ? [a.range] : [])));
    this.#allowHosts = new Set(allow.flatMap((a) => (a.kind === 'host' ? [a.name] : [])));
    Object.freeze(this);
  }

  refusal(
    destination: EgressDestination,
    isGateListener: (address: string, port: number) => boolean,
  ): string | null {
    if (this.#deny.length === 0) return null;
    if (this.#allowHosts.has(canonicalHost(destination.host))) return null;
    const address = parseIp(destination.address);
    // Not an address at all (a socket path, a name a custom lookup left alone): nothing to check.
    if (address === null) return null;
    if (this.#allowRanges.some((r) => r.contains(address))) return null;
    for (const rule of this.#deny) {
      if (rule.kind === 'range') {
        if (rule.range.contains(address))
          return `${destination.address} is in ${rule.range.text} (egress.deny)`;
      } else if (rule.name === 'gate') {
        if (isGateListener(destination.address, destination.port)) {
          return `${destination.address} port ${destination.port} is one of the gate's own listeners (egress.deny: gate)`;
        }
      } else if (EGRESS_CLASS_RANGES[rule.name].some((r) => r.contains(address))) {
        return `${destination.address} is a ${rule.name.replace('_', '-')} address (egress.deny: ${rule.name})`;
      }
    }
    return null;
  }
}

/** What an absent `egress` block compiles to. */
export const DEFAULT_EGRESS: EgressPolicy = compileEgress(DEFAULT_EGRESS_DENY, []);

function ranges(...texts: string[]): readonly IpRange[] {
  return Object.freeze(
    texts.map((t) => {
      const r = IpRange.parse(t);
      if (typeof r === 'string') throw new Error(`built-in range ${t}: ${r}`);
      return r;
    }),
  );
}
