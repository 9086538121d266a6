import { type AuditReport, verifyChain } from './audit-chain.js';
import type { AuditStore, ChainedEvent, ChainHead, EventPosition } from './types.js';

/**
 * The events of a store in (chain, seq) order, read page by page (keyset) so a long log is walked
 * in constant memory. With `chain`, only that chain's events, those after seq `after` (default 0)
 * up to seq `upTo` (default: its last).
 */
export async function* storeEvents(
  store: Pick<AuditStore, 'readEvents'>,
  options: {
    readonly chain?: number;
    readonly after?: number;
    readonly upTo?: number;
    readonly pageSize?: number;
  } = {},
): AsyncGenerator<ChainedEvent, void, undefined> {
  const pageSize = options.pageSize ?? 1000;
  const only = options.chain;
  const upTo = options.upTo ?? Number.POSITIVE_INFINITY;
  let after: EventPosition | 0 = only === undefined ? 0 : { chain: only, seq: options.after ?? 0 };
  for (;;) {
    // A chain's seqs have no gap: up to `upTo` is that many events, so no page reads past them.
    const want = after === 0 ? pageSize : Math.min(pageSize, upTo - after.seq);
    if (want <= 0) return;
    const page = await store.readEvents(after, want);
    for (const event of page) {
      if (only !== undefined && (event.chain !== only || event.seq > upTo)) return;
      yield event;
    }
    if (page.length < want) return;
    const last = page[page.length - 1]!;
    after = { chain: last.chain, seq: last.seq };
  }
}

/**
 * Verifies a live store's chains, every one independently. The head rows are read first (one
 * statement, one snapshot) and each chain's walk stops at its head: events appended meanwhile by
 * a running gate are newer than the heads and must not look like tampering. Events on a chain
 * without a head row are kept, so the verifier reports them.
 */
export async function verifyStoreChain(
  store: Pick<AuditStore, 'readEvents' | 'chainHeads'>,
): Promise<AuditReport> {
  const once = async (): Promise<AuditReport> => {
    const heads = await store.chainHeads();
    return verifyChain(upToHeads(storeEvents(store), heads), heads);
  };
  // A prune (`audit prune`) that commits between the heads and the events makes an intact chain
  // start past the base that was read: walked again with fresh heads, it verifies. Tampering
  // does not go away when walked twice.
  const first = await once();
  return first.ok ? first : once();
}

/**
 * The events up to each chain's head (an event on a chain without a head row is kept, so a
 * verifier reports it). Used by the store verifier and the audit export alike.
 */
export async function* upToHeads(
  events: AsyncIterable<ChainedEvent>,
  heads: readonly ChainHead[],
): AsyncGenerator<ChainedEvent, void, undefined> {
  const until = new Map<number, number>();
  for (const head of heads) until.set(head.chain, Math.max(until.get(head.chain) ?? 0, head.lastSeq));
  for await (const event of events) {
    const last = until.get(event.chain);
    if (last === undefined || event.seq <= last) yield event;
  }
}
