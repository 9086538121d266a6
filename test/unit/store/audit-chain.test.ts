import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  chainOf,
  computeEventHash,
  EVENT_CHAINS,
  GENESIS_HASH,
  verifyChain,
} from '../../../src/store/audit-chain.js';
import type { ChainedEvent, ChainHead } from '../../../src/store/types.js';

interface Log {
  /** In append order, chains interleaved as a live store writes them. */
  events: ChainedEvent[];
  heads: ChainHead[];
}

/**
 * A well-formed log of `n` events built the way eg_append_event builds it: every third event is a
 * decision without an operation (chained by its decision id), the others belong to one of a few
 * operations, so several events share a chain and every chain's order matters.
 */
function log(n: number): Log {
  const tails = new Map<number, { seq: number; hash: string }>();
  const events: ChainedEvent[] = [];
  for (let i = 1; i <= n; i++) {
    const operationId = i % 3 ? `op-${i % 7}` : null;
    const decisionId = `dec-${i}`;
    const chain = chainOf(operationId ?? decisionId);
    const tail = tails.get(chain) ?? { seq: 0, hash: GENESIS_HASH };
    const base = {
      chain,
      seq: tail.seq + 1,
      type: operationId ? 'attempt.outcome' : 'decision.halted',
      operationId,
      recordedAtUs: String(1_700_000_000_000_000 + i * 137),
      payload: JSON.stringify({ input: { decisionId }, i, note: 'héllo ✓' }),
      prevHash: tail.hash,
    };
    const event = { ...base, hash: computeEventHash(base) };
    events.push(event);
    tails.set(chain, { seq: event.seq, hash: event.hash });
  }
  const heads = Array.from({ length: EVENT_CHAINS }, (_, chain) => {
    const tail = tails.get(chain) ?? { seq: 0, hash: GENESIS_HASH };
    return { chain, lastSeq: tail.seq, lastHash: tail.hash };
  });
  return { events, heads };
}

/** Recomputes the hash of an event after tampering, as a careful forger would. */
function forge(e: Omit<ChainedEvent, 'hash'>): ChainedEvent {
  return { ...e, hash: computeEventHash(e) };
}

/** The chain with the most events, and the indexes of its events in `events`. */
function busiest(events: readonly ChainedEvent[]): { chain: number; at: number[] } {
  const byChain = new Map<number, number[]>();
  events.forEach((e, i) => {
    byChain.set(e.chain, [...(byChain.get(e.chain) ?? []), i]);
  });
  const [chain, at] = [...byChain].sort((a, b) => b[1].length - a[1].length)[0]!;
  return { chain, at };
}

describe('chainOf', () => {
  it('is the first byte of sha256(UTF-8 id) modulo EVENT_CHAINS, spread over every chain', () => {
    const first = createHash('sha256').update('é-op', 'utf8').digest()[0]!;
    expect(chainOf('é-op')).toBe(first % EVENT_CHAINS);
    const seen = new Set(Array.from({ length: 1000 }, (_, i) => chainOf(`op-${i}`)));
    expect([...seen].sort((a, b) => a - b)).toEqual(Array.from({ length: EVENT_CHAINS }, (_, i) => i));
  });
});

describe('computeEventHash', () => {
  it('hashes prev_hash, chain, seq, type, operation id, time and payload, newline separated, UTF-8', () => {
    const e = {
      chain: 3,
      seq: 7,
      type: 't',
      operationId: null,
      recordedAtUs: '123',
      payload: '{"a": "é"}',
      prevHash: 'ab',
    };
    const expected = createHash('sha256').update('ab\n3\n7\nt\n\n123\n{"a": "é"}', 'utf8').digest('hex');
    expect(computeEventHash(e)).toBe(expected);
    expect(computeEventHash({ ...e, chain: 4 })).not.toBe(expected);
  });
});

describe('verifyChain', () => {
  it('accepts an intact log, interleaved or chain after chain, from an array or an async iterable', async () => {
    const { events, heads } = log(40);
    expect(await verifyChain(events, heads)).toEqual({
      ok: true,
      checked: 40,
      chains: EVENT_CHAINS,
      broken: [],
    });
    const grouped = [...events].sort((a, b) => a.chain - b.chain || a.seq - b.seq);
    expect(await verifyChain(grouped, heads)).toMatchObject({ ok: true, checked: 40 });
    async function* lines(): AsyncGenerator<ChainedEvent> {
      // As read back from an exported JSONL file.
      for (const e of events) yield JSON.parse(JSON.stringify(e)) as ChainedEvent;
    }
    expect(await verifyChain(lines(), heads)).toMatchObject({ ok: true });
    expect(await verifyChain(events, null)).toMatchObject({ ok: true });
  });

  it('accepts an empty log whose heads are all genesis', async () => {
    const { heads } = log(0);
    expect(await verifyChain([], heads)).toEqual({ ok: true, checked: 0, chains: EVENT_CHAINS, broken: [] });
  });

  it('detects an edited payload, and names only the chain it is on', async () => {
    const { events, heads } = log(40);
    const { chain, at } = busiest(events);
    const i = at[2]!;
    events[i] = { ...events[i]!, payload: events[i]!.payload.replace('héllo', 'hello') };
    const report = await verifyChain(events, heads);
    expect(report).toMatchObject({
      ok: false,
      firstBad: { chain, seq: 3, reason: expect.stringContaining('edited') },
    });
    expect(report.broken).toHaveLength(1);
  });

  it('verifies chains independently: two broken chains are both reported', async () => {
    const { events, heads } = log(60);
    const chains = [...new Set(events.map((e) => e.chain))].slice(0, 2);
    for (const chain of chains) {
      const i = events.findIndex((e) => e.chain === chain);
      events[i] = { ...events[i]!, type: 'forged' };
    }
    const report = await verifyChain(events, heads);
    expect(report.broken.map((b) => [b.chain, b.seq])).toEqual(
      chains.sort((a, b) => a - b).map((c) => [c, 1]),
    );
  });

  it('detects an edited field whose hash was recomputed (the next link breaks)', async () => {
    const { events, heads } = log(40);
    const { chain, at } = busiest(events);
    events[at[1]!] = forge({ ...events[at[1]!]!, type: 'operation.cancelled' });
    expect(await verifyChain(events, heads)).toMatchObject({ ok: false, firstBad: { chain, seq: 3 } });
  });

  it('detects a deleted event, renumbered or not', async () => {
    const { events, heads } = log(40);
    const { chain, at } = busiest(events);
    const deleted = events.filter((_, i) => i !== at[1]);
    expect(await verifyChain(deleted, heads)).toMatchObject({
      ok: false,
      firstBad: { chain, seq: 3, reason: expect.stringContaining('event 2 is missing') },
    });
    let seq = 0;
    const renumbered = deleted.map((e) => (e.chain === chain ? { ...e, seq: ++seq } : e));
    expect(await verifyChain(renumbered, heads)).toMatchObject({ ok: false, firstBad: { chain, seq: 2 } });
  });

  it('detects an inserted event', async () => {
    const { events, heads } = log(40);
    const { chain, at } = busiest(events);
    const before = events[at[0]!]!;
    const fake = forge({
      ...before,
      seq: 2,
      payload: before.payload.replace('héllo', 'forged'),
      prevHash: before.hash,
    });
    events.splice(at[1]!, 0, fake);
    // The forged event links correctly; the original event 2 after it is where the chain breaks.
    expect(await verifyChain(events, heads)).toMatchObject({ ok: false, firstBad: { chain, seq: 2 } });
  });

  it('detects reordered events, with or without their seq swapped', async () => {
    const { events, heads } = log(40);
    const { chain, at } = busiest(events);
    const [i, j] = [at[1]!, at[2]!];
    const swapped = [...events];
    [swapped[i], swapped[j]] = [swapped[j]!, swapped[i]!];
    expect(await verifyChain(swapped, heads)).toMatchObject({ ok: false, firstBad: { chain, seq: 3 } });
    const renumbered = [...events];
    renumbered[i] = { ...events[j]!, seq: 2 };
    renumbered[j] = { ...events[i]!, seq: 3 };
    expect(await verifyChain(renumbered, heads)).toMatchObject({ ok: false, firstBad: { chain, seq: 2 } });
  });

  it('detects a truncated tail of one chain against its head row', async () => {
    const { events, heads } = log(40);
    const { chain, at } = busiest(events);
    const truncated = events.filter((_, i) => i !== at.at(-1));
    expect(await verifyChain(truncated, null)).toMatchObject({ ok: true });
    expect(await verifyChain(truncated, heads)).toMatchObject({
      ok: false,
      firstBad: { chain, seq: at.length, reason: expect.stringContaining('truncated') },
    });
  });

  it('detects a replaced tail and events past the head row', async () => {
    const { events, heads } = log(40);
    const { chain, at } = busiest(events);
    const last = at.at(-1)!;
    const replaced = [...events];
    replaced[last] = forge({ ...events[last]!, payload: events[last]!.payload.replace('héllo', 'forged') });
    expect(await verifyChain(replaced, heads)).toMatchObject({
      ok: false,
      firstBad: { chain, seq: at.length, reason: expect.stringContaining('tail replaced') },
    });
    const stale = heads.map((h) => (h.chain === chain ? { ...h, lastSeq: h.lastSeq - 1 } : h));
    expect(await verifyChain(events, stale)).toMatchObject({
      ok: false,
      firstBad: { chain, seq: at.length, reason: expect.stringContaining('past its head row') },
    });
  });

  it('detects a missing head row and an extra one', async () => {
    const { events, heads } = log(40);
    expect(await verifyChain(events, heads.slice(0, -1))).toMatchObject({
      ok: false,
      firstBad: { chain: EVENT_CHAINS - 1, reason: expect.stringContaining('missing') },
    });
    const extra = [...heads, { chain: EVENT_CHAINS, lastSeq: 0, lastHash: GENESIS_HASH }];
    expect(await verifyChain(events, extra)).toMatchObject({
      ok: false,
      firstBad: { chain: EVENT_CHAINS, reason: expect.stringContaining('extra row') },
    });
    expect(await verifyChain(events, [...heads, heads[3]!])).toMatchObject({
      ok: false,
      firstBad: { chain: 3, reason: expect.stringContaining('twice') },
    });
  });

  it('detects an event moved to another chain even with every hash recomputed', async () => {
    const opId = 'op-moved';
    const home = chainOf(opId);
    const other = (home + 1) % EVENT_CHAINS;
    const moved = forge({
      chain: other,
      seq: 1,
      type: 'attempt.outcome',
      operationId: opId,
      recordedAtUs: '1',
      payload: '{}',
      prevHash: GENESIS_HASH,
    });
    expect(await verifyChain([moved], null)).toMatchObject({
      ok: false,
      firstBad: { chain: other, seq: 1, reason: expect.stringContaining(`belongs on chain ${home}`) },
    });
    const nowhere = forge({ ...moved, chain: EVENT_CHAINS });
    expect(await verifyChain([nowhere], null)).toMatchObject({
      ok: false,
      firstBad: { chain: EVENT_CHAINS, reason: expect.stringContaining('not a chain') },
    });
  });

  it('requires every chain to start at seq 1 from the genesis hash', async () => {
    const { events } = log(40);
    const { chain, at } = busiest(events);
    const headless = events.filter((_, i) => i !== at[0]);
    expect(await verifyChain(headless, null)).toMatchObject({ ok: false, firstBad: { chain, seq: 2 } });
    const badGenesis = [forge({ ...events[at[0]!]!, prevHash: 'f'.repeat(64) })];
    expect(await verifyChain(badGenesis, null)).toMatchObject({ ok: false, firstBad: { chain, seq: 1 } });
  });
});
