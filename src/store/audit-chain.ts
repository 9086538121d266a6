import { createHash } from 'node:crypto';
import type { ChainHead, EventRecord } from './types.js';

/** `prev_hash` of the first event, and `last_hash` of an empty chain. */
export const GENESIS_HASH = '0'.repeat(64);

/** The outcome of walking the event log. */
export interface AuditReport {
  readonly ok: boolean;
  /** Events examined, including the first bad one. */
  readonly checked: number;
  /** Sequence number of the last event that verified (0 when none did). */
  readonly lastSeq: number;
  readonly firstBad?: { readonly seq: number; readonly reason: string };
}

/**
 * The event hash, byte for byte what `eg_append_events` computes in SQL:
 * sha256 of `prev_hash \n seq \n type \n operation_id|'' \n recorded_at_us \n payload`, UTF-8, hex.
 * Every field that identifies or orders the event is inside, so editing, renumbering or moving an
 * event changes its hash, and the `prev_hash` link makes deleting or inserting one visible.
 */
export function computeEventHash(
  e: Pick<EventRecord, 'seq' | 'type' | 'operationId' | 'recordedAtUs' | 'payload' | 'prevHash'>,
): string {
  const text = `${e.prevHash}\n${e.seq}\n${e.type}\n${e.operationId ?? ''}\n${e.recordedAtUs}\n${e.payload}`;
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/**
 * Verifies a chain offline (no database needed, e.g. over an exported JSONL file). Events must be
 * given in the order they are stored (ascending seq), starting at seq 1. With `head`, a truncated
 * tail is detected too; without it only the events given are checked.
 */
export async function verifyChain(
  events: AsyncIterable<EventRecord> | Iterable<EventRecord>,
  head: ChainHead | null,
): Promise<AuditReport> {
  let expectedSeq = 1;
  let prevHash = GENESIS_HASH;
  let checked = 0;
  let lastSeq = 0;
  const bad = (seq: number, reason: string): AuditReport => ({
    ok: false,
    checked,
    lastSeq,
    firstBad: { seq, reason },
  });

  for await (const e of events) {
    checked += 1;
    const seq = Number(e.seq);
    if (seq !== expectedSeq) {
      const what = seq > expectedSeq ? `event ${expectedSeq} is missing (deleted or moved)` : 'out of order';
      return bad(seq, `expected seq ${expectedSeq} but found ${seq}: ${what}`);
    }
    if (computeEventHash(e) !== e.hash) {
      return bad(seq, 'hash does not match the event content (event edited)');
    }
    if (e.prevHash !== prevHash) {
      return bad(seq, 'prev_hash does not match the previous event (event inserted, deleted or reordered)');
    }
    prevHash = e.hash;
    lastSeq = seq;
    expectedSeq += 1;
  }

  if (head !== null) {
    const headSeq = Number(head.lastSeq);
    if (headSeq !== lastSeq) {
      const reason =
        headSeq > lastSeq
          ? `chain ends at seq ${lastSeq} but the chain head records seq ${headSeq} (tail truncated)`
          : `chain continues past the chain head (seq ${headSeq}): events appended outside the store`;
      return bad(Math.min(headSeq, lastSeq) + 1, reason);
    }
    if (head.lastHash !== prevHash) {
      return bad(lastSeq, 'the last event hash does not match the chain head (tail replaced)');
    }
  }
  return { ok: true, checked, lastSeq };
}
