import { canonicalHost } from './canonical-host.js';
import {
  compileEgress,
  DEFAULT_EGRESS_DENY,
  EGRESS_CLASSES,
  type EgressAllowRule,
  type EgressDenyRule,
} from './egress-policy.js';
import { IpRange, parseIp } from './ip-range.js';
import type { PolicyReader, Slot } from './policy-reader.js';
import type { EgressClass, EgressPolicy } from './types.js';

const HOST_NAME =
  /^(?=.{1,253}$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*$/;

export const EGRESS_FIELDS = ['deny', 'allow'] as const;

/** A file's `egress` block, compiled, with the text files are compared by (`deny` / `allow` as written, in order). */
export interface ParsedEgress {
  readonly policy: EgressPolicy;
  /** Canonical spelling of the block: two files agree when theirs are equal. */
  readonly key: string;
}

/**
 * `egress: { deny, allow }` (docs/design.md §4.1). `deny` lists classes (`link_local`, `loopback`,
 * `private`, `gate`) or CIDRs and defaults to `[link_local, gate]` when left out; `allow` lists
 * CIDRs or exact host names exempt from `deny`. Returns `null` after an issue.
 */
export function readEgress(r: PolicyReader, slot: Slot): ParsedEgress | null {
  const before = r.issueCount;
  const f = r.fields(slot, EGRESS_FIELDS);
  if (f === null) return null;
  const denySlot = f.get('deny');
  const allowSlot = f.get('allow');
  const deny =
    denySlot === undefined
      ? [...DEFAULT_EGRESS_DENY]
      : (r.items(denySlot) ?? []).map((item) => readDenyRule(r, item)).filter((d) => d !== null);
  const allow =
    allowSlot === undefined
      ? []
      : (r.items(allowSlot) ?? []).map((item) => readAllowRule(r, item)).filter((a) => a !== null);
  if (r.issueCount !== before) return null;
  const policy = compileEgress(unique(deny, denyText), unique(allow, allowText));
  return { policy, key: JSON.stringify({ deny: [...policy.deny].sort(), allow: [...policy.allow].sort() }) };
}

function readDenyRule(r: PolicyReader, slot: Slot): EgressDenyRule | null {
  const text = r.string(slot);
  if (text === null) return null;
  if ((EGRESS_CLASSES as readonly string[]).includes(text))
    return { kind: 'class', name: text as EgressClass };
  const range = IpRange.parse(text);
  if (typeof range !== 'string') return { kind: 'range', range };
  const looksLikeAddress = text.includes('/') || parseIp(text) !== null || /^[0-9a-f:.[\]]+$/i.test(text);
  r.issue(
    slot.at,
    slot.field,
    looksLikeAddress
      ? `invalid CIDR ${JSON.stringify(text)}: ${range}`
      : `expected one of ${EGRESS_CLASSES.join(', ')} or a CIDR (e.g. 10.0.0.0/8), got ${JSON.stringify(text)}`,
  );
  return null;
}

function readAllowRule(r: PolicyReader, slot: Slot): EgressAllowRule | null {
  const text = r.string(slot);
  if (text === null) return null;
  const slash = text.indexOf('/');
  if (slash !== -1 || parseIp(text) !== null) {
    const range = IpRange.parse(text);
    if (typeof range !== 'string') return { kind: 'range', range };
    r.issue(slot.at, slot.field, `invalid CIDR ${JSON.stringify(text)}: ${range}`);
    return null;
  }
  const name = canonicalHost(text);
  if (!HOST_NAME.test(name)) {
    r.issue(
      slot.at,
      slot.field,
      `expected a CIDR (e.g. 127.0.0.1/32) or an exact host name, got ${JSON.stringify(text)}` +
        (text.includes('*') ? ' (wildcards are not accepted here: list each name)' : ''),
    );
    return null;
  }
  return { kind: 'host', name };
}

function denyText(d: EgressDenyRule): string {
  return d.kind === 'class' ? d.name : d.range.text;
}

function allowText(a: EgressAllowRule): string {
  return a.kind === 'host' ? a.name : a.range.text;
}

function unique<T>(items: readonly T[], text: (item: T) => string): T[] {
  const seen = new Set<string>();
  return items.filter((item) => {
    const t = text(item);
    if (seen.has(t)) return false;
    seen.add(t);
    return true;
  });
}
