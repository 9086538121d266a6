import { createHash } from 'node:crypto';
import { leafHash } from './merkle-tree.js';
import type { ChainedEvent, ChainHead, EventRecord } from './types.js';

/** `prev_hash` of the first event of every chain, and `last_hash` of an empty chain. */
export const GENESIS_HASH = '0'.repeat(64);

/**
 * The event log is this many independent hash chains (head rows 0..EVENT_CHAINS-1), so writers
 * of unrelated operations never wait on one head row lock. Equal to CHAINS in migration
 * 0001-initial and to the literal in src/store/functions/eg_chain_of.sql.
 */
export const EVENT_CHAINS = 64;

/**
 * The chain of an event: the first byte of sha256(UTF-8 id), modulo EVENT_CHAINS, where the id is
 * the event's operation id, or its decision id (payload `input.decisionId`) when it belongs to no
 * operation. The same as
 * `eg_chain_of` in SQL, so one operation's events are always on one chain, in order.
 */
export function chainOf(id: string): number {
  return createHash('sha256').update(id, 'utf8').digest()[0]! % EVENT_CHAINS;
}

/** One problem found, located by chain and seq (seq 0: a head row problem on an empty chain). */
export interface BadEvent {
  readonly chain: number;
  readonly seq: number;
  readonly reason: string;
}

/** The outcome of walking the event log. */
export interface AuditReport {
  readonly ok: boolean;
  /** Events examined over every chain, each broken chain's first bad event included. */
  readonly checked: number;
  /** Chains examined: every head row's chain and every chain an event was found on. */
  readonly chains: number;
  /** The first problem of each broken chain, by chain (each chain is verified independently). */
  readonly broken: readonly BadEvent[];
  /** `broken[0]`: the first bad event, for one-line reports. */
  readonly firstBad?: BadEvent;
}

type HashedFields = 'chain' | 'seq' | 'type' | 'operationId' | 'recordedAtUs' | 'payload' | 'prevHash';

/**
 * The event hash, byte for byte what `eg_append_event` computes in SQL: sha256 of
 * `prev_hash \n chain \n seq \n type \n operation_id|'' \n recorded_at_us \n payload`, UTF-8, hex.
 * Every field that identifies or orders the event is inside, so editing, renumbering or moving an
 * event (within its chain or to another one) changes its hash, and the `prev_hash` link makes
 * deleting or inserting one visible.
 */
export function computeEventHash(e: Pick<ChainedEvent, HashedFields>): string {
  return createHash('sha256').update(eventHashInput(e), 'utf8').digest('hex');
}

/**
 * The text an event's hash is taken over; also the data of its leaf in the sealed log's Merkle
 * tree (audit-sealer.ts), so a leaf covers the event's every field and its link to the previous one.
 */
export function eventHashInput(e: Pick<ChainedEvent, HashedFields>): string {
  return `${e.prevHash}\n${e.chain}\n${e.seq}\n${e.type}\n${e.operationId ?? ''}\n${e.recordedAtUs}\n${e.payload}`;
}

/** Whether an event has a chain (seq, link and hash), which events from before migration 0027 all have. */
export function isChained(e: EventRecord): e is ChainedEvent {
  return e.seq !== null;
}

/**
 * The first element of the leaf data of an event without a chain. That data is a JSON array, so
 * it begins with `[`, where a chained event's begins with its 64-hex link: no leaf of one form is
 * the leaf of the other.
 */
export const UNCHAINED_LEAF_TAG = 'effectgate-event/unchained';

/**
 * An event's leaf hash in the sealed log's tree: what the sealer folds in and every verifier
 * rebuilds. A chained event's leaf is its hash input (every field and its link to the previous
 * one); an event without a chain has no hash of its own, so its leaf covers its position and
 * every field, and is all that protects it once sealed. Its fields are a JSON array, so none can
 * be read as another (a null operation is not an empty one; a line break in one is escaped).
 */
export function eventLeafHash(e: EventRecord): Buffer {
  if (e.seq === null) {
    return leafHash(
      JSON.stringify([UNCHAINED_LEAF_TAG, e.pos, e.type, e.operationId, e.recordedAtUs, e.payload]),
    );
  }
  return leafHash(eventHashInput(e));
}

interface ChainState {
  expectedSeq: number;
  prevHash: string;
  lastSeq: number;
  broken: boolean;
}

/**
 * Verifies the chains offline (no database needed, e.g. over an exported JSONL file). Each
 * chain's events must come in ascending seq from seq 1; chains may be given one after another or
 * interleaved. With `heads` (one row per chain, as `chainHeads()` returns them), a missing or
 * extra head row and a truncated or extended tail are detected too; without, only the events
 * given are checked.
 */
export async function verifyChain(
  events: AsyncIterable<ChainedEvent> | Iterable<ChainedEvent>,
  heads: readonly ChainHead[] | null,
): Promise<AuditReport> {
  const chains = new Map<number, ChainState>();
  const broken: BadEvent[] = [];
  const headOf = new Map<number, ChainHead>();
  // Each chain starts after its base (retention removed the events up to it; 0 and genesis
  // while none was): the first event must be baseSeq + 1 and link to baseHash.
  const stateOf = (chain: number): ChainState => {
    let state = chains.get(chain);
    if (state === undefined) {
      const head = headOf.get(chain);
      const baseSeq = Number(head?.baseSeq ?? 0);
      state = {
        expectedSeq: baseSeq + 1,
        prevHash: head?.baseHash ?? GENESIS_HASH,
        lastSeq: baseSeq,
        broken: false,
      };
      chains.set(chain, state);
    }
    return state;
  };
  if (heads !== null) {
    for (const problem of headRowProblems(heads)) broken.push(problem);
    for (const head of heads) if (!headOf.has(Number(head.chain))) headOf.set(Number(head.chain), head);
    for (let chain = 0; chain < EVENT_CHAINS; chain++) stateOf(chain);
  }

  let checked = 0;
  for await (const e of events) {
    const chain = Number(e.chain);
    const state = stateOf(chain);
    if (state.broken) continue;
    checked += 1;
    const reason = eventProblem(e, chain, state);
    if (reason !== null) {
      state.broken = true;
      broken.push({ chain, seq: Number(e.seq), reason });
      continue;
    }
    state.prevHash = e.hash;
    state.lastSeq = state.expectedSeq;
    state.expectedSeq += 1;
  }

  if (heads !== null) {
    for (const [chain, head] of headOf) {
      const state = chains.get(chain);
      if (state === undefined || state.broken) continue;
      const problem = tailProblem(chain, state, head);
      if (problem !== null) broken.push(problem);
    }
  }
  broken.sort((a, b) => a.chain - b.chain || a.seq - b.seq);
  const report = { ok: broken.length === 0, checked, chains: chains.size, broken };
  return broken.length === 0 ? report : { ...report, firstBad: broken[0]! };
}

/** Exactly one head row for each chain 0..EVENT_CHAINS-1. */
function headRowProblems(heads: readonly ChainHead[]): BadEvent[] {
  const problems: BadEvent[] = [];
  const seen = new Set<number>();
  for (const head of heads) {
    const chain = Number(head.chain);
    const seq = Number(head.lastSeq);
    if (!Number.isInteger(chain) || chain < 0 || chain >= EVENT_CHAINS) {
      problems.push({
        chain,
        seq,
        reason: `head row of chain ${chain}: this store has no such chain (extra row)`,
      });
    } else if (seen.has(chain)) {
      problems.push({ chain, seq, reason: `head row of chain ${chain} appears twice (extra row)` });
    } else if (Number(head.baseSeq ?? 0) > seq) {
      problems.push({ chain, seq, reason: `head row of chain ${chain}: its base is past its last event` });
    }
    seen.add(chain);
  }
  for (let chain = 0; chain < EVENT_CHAINS; chain++) {
    if (!seen.has(chain))
      problems.push({ chain, seq: 0, reason: `the head row of chain ${chain} is missing (deleted)` });
  }
  return problems;
}

function eventProblem(e: ChainedEvent, chain: number, state: ChainState): string | null {
  const seq = Number(e.seq);
  if (!Number.isInteger(chain) || chain < 0 || chain >= EVENT_CHAINS) {
    return `chain ${e.chain} is not a chain of this store (event inserted)`;
  }
  if (seq !== state.expectedSeq) {
    const what =
      seq > state.expectedSeq ? `event ${state.expectedSeq} is missing (deleted or moved)` : 'out of order';
    return `expected seq ${state.expectedSeq} but found ${seq}: ${what}`;
  }
  if (computeEventHash(e) !== e.hash) return 'hash does not match the event content (event edited)';
  if (e.prevHash !== state.prevHash) {
    return 'prev_hash does not match the previous event (event inserted, deleted or reordered)';
  }
  const owner = e.operationId ?? ownerOf(e.type, e.payload);
  if (owner === null) {
    return 'the event names neither an operation, a decision, a grant nor a run release (event forged)';
  }
  const expected = chainOf(owner);
  if (expected !== chain) return `the event belongs on chain ${expected}, not ${chain} (event moved)`;
  return null;
}

/**
 * What an event of no operation belongs to, which picks its chain: a decision's `input.decisionId`,
 * a session grant's `input.grantId` (grant.* events), a run release's `input.releaseId`
 * (run.released; payloads: src/store/functions/README.md).
 */
function ownerOf(type: string, payload: string): string | null {
  try {
    const input = (
      JSON.parse(payload) as {
        input?: { decisionId?: unknown; grantId?: unknown; releaseId?: unknown };
      } | null
    )?.input;
    const id = type.startsWith('grant.')
      ? input?.grantId
      : type === 'run.released'
        ? input?.releaseId
        : input?.decisionId;
    return typeof id === 'string' ? id : null;
  } catch {
    return null;
  }
}

function tailProblem(chain: number, state: ChainState, head: ChainHead): BadEvent | null {
  const headSeq = Number(head.lastSeq);
  if (headSeq > state.lastSeq) {
    const reason = `chain ends at seq ${state.lastSeq} but its head row records seq ${headSeq} (tail truncated)`;
    return { chain, seq: state.lastSeq + 1, reason };
  }
  if (headSeq < state.lastSeq) {
    const reason = `chain continues past its head row (seq ${headSeq}): events appended outside the store`;
    return { chain, seq: headSeq + 1, reason };
  }
  if (head.lastHash !== state.prevHash) {
    return { chain, seq: headSeq, reason: 'the last event hash does not match the head row (tail replaced)' };
  }
  return null;
}
