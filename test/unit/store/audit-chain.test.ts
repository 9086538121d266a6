import { describe, expect, it } from 'vitest';
import { computeEventHash, GENESIS_HASH, verifyChain } from '../../../src/store/audit-chain.js';
import type { ChainHead, EventRecord } from '../../../src/store/types.js';

/** A well-formed chain of `n` events, built the way eg_append_events builds it. */
function chain(n: number): { events: EventRecord[]; head: ChainHead } {
  const events: EventRecord[] = [];
  let prevHash = GENESIS_HASH;
  for (let seq = 1; seq <= n; seq++) {
    const base = {
      seq,
      type: seq % 2 ? 'decision.recorded' : 'attempt.started',
      operationId: seq % 3 ? `op-${seq}` : null,
      recordedAtUs: String(1_700_000_000_000_000 + seq * 137),
      payload: JSON.stringify({ seq, note: 'héllo ✓' }),
      prevHash,
    };
    const event = { ...base, hash: computeEventHash(base) };
    events.push(event);
    prevHash = event.hash;
  }
  return { events, head: { lastSeq: n, lastHash: prevHash } };
}

/** Recomputes the hash of an event after tampering, as a careful forger would. */
function forge(e: Omit<EventRecord, 'hash'>): EventRecord {
  return { ...e, hash: computeEventHash(e) };
}

describe('computeEventHash', () => {
  it('hashes prev_hash, seq, type, operation id, time and payload, newline separated, UTF-8', async () => {
    const { createHash } = await import('node:crypto');
    const e = {
      seq: 7,
      type: 't',
      operationId: null,
      recordedAtUs: '123',
      payload: '{"a": "é"}',
      prevHash: 'ab',
    };
    const expected = createHash('sha256').update('ab\n7\nt\n\n123\n{"a": "é"}', 'utf8').digest('hex');
    expect(computeEventHash(e)).toBe(expected);
  });
});

describe('verifyChain', () => {
  it('accepts an intact chain, from an array or an async iterable', async () => {
    const { events, head } = chain(10);
    expect(await verifyChain(events, head)).toEqual({ ok: true, checked: 10, lastSeq: 10 });
    async function* lines(): AsyncGenerator<EventRecord> {
      // As read back from an exported JSONL file.
      for (const e of events) yield JSON.parse(JSON.stringify(e)) as EventRecord;
    }
    expect(await verifyChain(lines(), head)).toMatchObject({ ok: true, lastSeq: 10 });
    expect(await verifyChain(events, null)).toMatchObject({ ok: true });
  });

  it('accepts an empty chain with the genesis head', async () => {
    expect(await verifyChain([], { lastSeq: 0, lastHash: GENESIS_HASH })).toEqual({
      ok: true,
      checked: 0,
      lastSeq: 0,
    });
  });

  it('detects an edited payload', async () => {
    const { events, head } = chain(10);
    events[4] = { ...events[4]!, payload: events[4]!.payload.replace('héllo', 'hello') };
    expect(await verifyChain(events, head)).toMatchObject({
      ok: false,
      lastSeq: 4,
      firstBad: { seq: 5, reason: expect.stringContaining('edited') },
    });
  });

  it('detects an edited field whose hash was recomputed (the next link breaks)', async () => {
    const { events, head } = chain(10);
    events[4] = forge({ ...events[4]!, type: 'operation.cancelled' });
    expect(await verifyChain(events, head)).toMatchObject({ ok: false, firstBad: { seq: 6 } });
  });

  it('detects a deleted event', async () => {
    const { events, head } = chain(10);
    events.splice(3, 1);
    expect(await verifyChain(events, head)).toMatchObject({
      ok: false,
      firstBad: { seq: 5, reason: expect.stringContaining('event 4 is missing') },
    });
  });

  it('detects a deleted event even when the later ones were renumbered', async () => {
    const { events, head } = chain(10);
    events.splice(3, 1);
    const renumbered = events.map((e, i) => ({ ...e, seq: i + 1 }));
    expect(await verifyChain(renumbered, head)).toMatchObject({ ok: false, firstBad: { seq: 4 } });
  });

  it('detects an inserted event', async () => {
    const { events, head } = chain(10);
    const fake = forge({
      seq: 4,
      type: 'key.released',
      operationId: 'op-x',
      recordedAtUs: events[3]!.recordedAtUs,
      payload: '{}',
      prevHash: events[2]!.hash,
    });
    events.splice(3, 0, fake);
    // The forged event links correctly; the original event 4 after it is where the chain breaks.
    expect(await verifyChain(events, head)).toMatchObject({ ok: false, lastSeq: 4, firstBad: { seq: 4 } });
  });

  it('detects reordered events', async () => {
    const { events, head } = chain(10);
    [events[5], events[6]] = [events[6]!, events[5]!];
    expect(await verifyChain(events, head)).toMatchObject({ ok: false, firstBad: { seq: 7 } });

    const swappedSeq = chain(10);
    const a = swappedSeq.events[5]!;
    const b = swappedSeq.events[6]!;
    swappedSeq.events[5] = { ...b, seq: 6 };
    swappedSeq.events[6] = { ...a, seq: 7 };
    expect(await verifyChain(swappedSeq.events, swappedSeq.head)).toMatchObject({
      ok: false,
      firstBad: { seq: 6 },
    });
  });

  it('detects a truncated tail against the chain head', async () => {
    const { events, head } = chain(10);
    const truncated = events.slice(0, 8);
    expect(await verifyChain(truncated, null)).toMatchObject({ ok: true });
    expect(await verifyChain(truncated, head)).toMatchObject({
      ok: false,
      lastSeq: 8,
      firstBad: { seq: 9, reason: expect.stringContaining('truncated') },
    });
  });

  it('detects a replaced tail and events past the head', async () => {
    const { events, head } = chain(10);
    events[9] = forge({ ...events[9]!, payload: '{"forged":true}' });
    expect(await verifyChain(events, head)).toMatchObject({ ok: false, firstBad: { seq: 10 } });
    const longer = chain(11);
    expect(await verifyChain(longer.events, head)).toMatchObject({ ok: false, firstBad: { seq: 11 } });
  });

  it('requires the chain to start at seq 1 from the genesis hash', async () => {
    const { events } = chain(5);
    expect(await verifyChain(events.slice(1), null)).toMatchObject({ ok: false, firstBad: { seq: 2 } });
    const badGenesis = [forge({ ...events[0]!, prevHash: 'f'.repeat(64) })];
    expect(await verifyChain(badGenesis, null)).toMatchObject({ ok: false, firstBad: { seq: 1 } });
  });
});
