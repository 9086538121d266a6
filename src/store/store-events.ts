import { type AuditReport, verifyChain } from './audit-chain.js';
import type { EventRecord, Store } from './types.js';

/**
 * The events of a store with `seq` up to `untilSeq` (default: all), ascending, read page by page
 * so a long log is walked in constant memory.
 */
export async function* storeEvents(
  store: Pick<Store, 'readEvents'>,
  options: { readonly untilSeq?: number; readonly pageSize?: number } = {},
): AsyncGenerator<EventRecord, void, undefined> {
  const pageSize = options.pageSize ?? 1000;
  const until = options.untilSeq ?? Number.POSITIVE_INFINITY;
  let after = 0;
  for (;;) {
    const page = await store.readEvents(after, pageSize);
    for (const event of page) {
      if (event.seq > until) return;
      yield event;
    }
    if (page.length < pageSize) return;
    after = page[page.length - 1]!.seq;
  }
}

/**
 * Verifies a live store's chain. The head is read first and the walk stops at it: events appended
 * meanwhile by a running gate are newer than the head and must not look like tampering.
 */
export async function verifyStoreChain(store: Pick<Store, 'readEvents' | 'chainHead'>): Promise<AuditReport> {
  const head = await store.chainHead();
  return verifyChain(storeEvents(store, { untilSeq: head.lastSeq }), head);
}
