import { computeEventHash, GENESIS_HASH } from './audit-chain.js';
import type { ChainedEvent, ChainHead, EventRange } from './types.js';

/** What a seal round read by chain: the ranges it seals, and the reads that include each range's link. */
export interface ChainPlan {
  readonly ranges: readonly EventRange[];
  readonly reads: readonly EventRange[];
}

/**
 * The new events of every range, checked against their chain: seqs without a gap, each hash
 * recomputed, each linked to the one before (the sealed event, or the chain's base). A reason
 * string when one is not. `events` in (chain, seq) order, each range's link event first when its
 * read includes one.
 */
export function checkChainLinks(
  plan: ChainPlan,
  heads: readonly ChainHead[],
  events: readonly ChainedEvent[],
): ChainedEvent[] | string {
  const headOf = new Map(heads.map((h) => [h.chain, h]));
  const byChain = new Map<number, ChainedEvent[]>();
  for (const e of events) {
    const list = byChain.get(e.chain);
    if (list === undefined) byChain.set(e.chain, [e]);
    else list.push(e);
  }
  const leaves: ChainedEvent[] = [];
  for (const [i, range] of plan.ranges.entries()) {
    const read = plan.reads[i]!;
    const list = byChain.get(range.chain) ?? [];
    const head = headOf.get(range.chain);
    let prev = GENESIS_HASH;
    let k = 0;
    if (read.after < range.after) {
      const link = list[0];
      if (link === undefined || link.seq !== range.after) {
        return `chain ${range.chain} has no event ${range.after}`;
      }
      if (computeEventHash(link) !== link.hash) {
        return `event ${range.after} of chain ${range.chain} was edited (its hash differs)`;
      }
      prev = link.hash;
      k = 1;
    } else {
      prev = range.after === (head?.baseSeq ?? 0) ? (head?.baseHash ?? GENESIS_HASH) : GENESIS_HASH;
    }
    for (let seq = range.after + 1; seq <= range.upTo; seq++, k++) {
      const e = list[k];
      if (e === undefined || e.seq !== seq) return `chain ${range.chain} has no event ${seq}`;
      if (e.prevHash !== prev) return `event ${seq} of chain ${range.chain} does not link to the one before`;
      if (computeEventHash(e) !== e.hash)
        return `event ${seq} of chain ${range.chain} was edited (its hash differs)`;
      prev = e.hash;
      leaves.push(e);
    }
    if (k !== list.length) return `chain ${range.chain} has an event past ${range.upTo} in this batch`;
  }
  return leaves;
}

/** The read of a range with its link: the sealed event itself too, when retention kept it. */
export function readWithLink(range: EventRange, baseSeq: number): EventRange {
  return { ...range, after: range.after > baseSeq ? range.after - 1 : range.after };
}
