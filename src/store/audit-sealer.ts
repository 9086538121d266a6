import { computeEventHash, eventHashInput, GENESIS_HASH } from './audit-chain.js';
import { checkpointNote } from './checkpoint-note.js';
import { EMPTY_ROOT_HEX, leafHash, MerkleFrontier } from './merkle-tree.js';
import { PeriodicRounds } from './periodic-rounds.js';
import type { NoteSigner } from './signed-note.js';
import type {
  AuditStore,
  ChainHead,
  CheckpointRecord,
  EventRange,
  EventRecord,
  SealedHeads,
} from './types.js';

/*
 * The sealer folds the events the chains have committed into one RFC 9162 Merkle tree and appends
 * a signed checkpoint of it (audit_checkpoints), off the hot path: it reads what is committed and
 * writes one row, and a gate's calls never wait for it. A chain's head row moves in the same
 * transaction as its event, so every event up to a head the sealer reads is committed and stays
 * where it is; the events a checkpoint adds are those after the previous checkpoint's heads up to
 * the heads read now, in (chain, seq) order, and that order is final.
 *
 * Before folding an event in, the sealer checks its chain link and hash: it never signs a log
 * that does not verify (it logs why, and tries again on its next round, so a repaired log or one
 * retention moved on is sealed). Gates sharing a database each run one; eg_append_checkpoint
 * keeps their checkpoints one line (the loser of a race rereads and goes on from the winner's).
 */

export type SealerStore = Pick<
  AuditStore,
  'auditLogId' | 'chainHeads' | 'readEventRanges' | 'latestCheckpoint' | 'appendCheckpoint'
>;

export interface SealerLogger {
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

export interface AuditSealerOptions {
  readonly store: SealerStore;
  readonly signer: NoteSigner;
  /** How often it looks for new events; default 250 ms, so sealing lags a commit by about that. */
  readonly intervalMs?: number;
  /**
   * Most events one checkpoint takes from one chain; default 64, so one round reads at most 4,096
   * events (a few MB) and a long backlog (an upgraded store) is many small rounds that calls
   * interleave with, not one read that stalls an embedded store.
   */
  readonly maxPerChain?: number;
  readonly logger?: SealerLogger;
  /** The clock of `sealedAt` (tests). */
  readonly now?: () => Date;
}

/** What one round did. */
export type SealStep = 'sealed' | 'idle' | 'raced' | 'refused';

/** Most rounds one `seal()` runs: a backlog beyond (rounds × chains × maxPerChain) waits for the next. */
const MAX_ROUNDS = 1000;

export class AuditSealer {
  readonly #o: Required<Omit<AuditSealerOptions, 'logger'>> & { readonly logger: SealerLogger | null };
  #logId: string | null = null;
  #latest: CheckpointRecord | null = null;
  readonly #rounds: PeriodicRounds;
  #lastRefusal: string | null = null;
  /** The last round left events behind (a chain had more than maxPerChain new ones). */
  #behind = false;

  constructor(options: AuditSealerOptions) {
    this.#o = Object.freeze({
      store: options.store,
      signer: options.signer,
      intervalMs: options.intervalMs ?? 250,
      maxPerChain: options.maxPerChain ?? 64,
      logger: options.logger ?? null,
      now: options.now ?? ((): Date => new Date()),
    });
    this.#rounds = new PeriodicRounds({
      intervalMs: this.#o.intervalMs,
      round: () => this.seal(),
      onError: (err) => this.#o.logger?.warn({ err: String(err) }, 'audit sealer: round failed'),
    });
  }

  /** Seals every `intervalMs` until `stop()`; a round that fails is logged and the next one tries again. */
  start(): void {
    this.#rounds.start();
  }

  /** Stops the rounds and waits for the one in progress. */
  stop(): Promise<void> {
    return this.#rounds.stop();
  }

  /**
   * Seals until caught up with the heads read in the last round (bounded); returns checkpoints
   * written. A round that took every new event ends it: under a steady load that is one
   * checkpoint per interval, not one per handful of events (each costs a read, a signature and a
   * row; measured in bench/sealing-lag.ts).
   */
  async seal(): Promise<number> {
    let written = 0;
    for (let round = 0; round < MAX_ROUNDS; round++) {
      this.#behind = false;
      const step = await this.sealOnce();
      if (step === 'sealed') written += 1;
      if (step === 'raced' || (step === 'sealed' && this.#behind)) continue;
      break;
    }
    return written;
  }

  /** One round: at most one checkpoint. */
  async sealOnce(): Promise<SealStep> {
    const { store } = this.#o;
    this.#logId ??= await store.auditLogId();
    this.#latest ??= await store.latestCheckpoint();
    const heads = await store.chainHeads();
    const latest = this.#latest;
    if (latest === null) {
      // The log starts at the chains' bases: events retention removed before any checkpoint are in
      // their archives, not in the tree.
      const bases: Record<string, number> = {};
      for (const h of heads) if ((h.baseSeq ?? 0) > 0) bases[String(h.chain)] = h.baseSeq!;
      // The events already there are sealed by the rounds that follow, in the same seal().
      this.#behind = heads.some((h) => h.lastSeq > (h.baseSeq ?? 0));
      return this.#append(null, 0, bases, MerkleFrontier.empty());
    }
    const plan = this.#plan(latest.heads, heads);
    if (typeof plan === 'string') return this.#refuse(plan);
    if (plan.ranges.length === 0) return 'idle';
    const events = await store.readEventRanges(plan.reads);
    const leaves = checkLinks(plan, heads, events);
    if (typeof leaves === 'string') return this.#refuse(leaves);
    const frontier = MerkleFrontier.fromJSON(latest.frontier);
    for (const event of leaves) frontier.append(leafHash(eventHashInput(event)));
    const next: Record<string, number> = { ...latest.heads };
    for (const r of plan.ranges) next[String(r.chain)] = r.upTo;
    return this.#append(latest.size, latest.size + leaves.length, next, frontier);
  }

  #plan(
    sealed: SealedHeads,
    heads: readonly ChainHead[],
  ): { readonly ranges: EventRange[]; readonly reads: EventRange[] } | string {
    const ranges: EventRange[] = [];
    const reads: EventRange[] = [];
    for (const h of heads) {
      const from = sealed[String(h.chain)] ?? 0;
      const base = h.baseSeq ?? 0;
      if (from > h.lastSeq) return `chain ${h.chain} ends at ${h.lastSeq}, before its sealed event ${from}`;
      if (from < base) return `chain ${h.chain} was pruned to ${base}, past its sealed event ${from}`;
      const upTo = Math.min(h.lastSeq, from + this.#o.maxPerChain);
      if (upTo < h.lastSeq) this.#behind = true;
      if (upTo === from) continue;
      ranges.push({ chain: h.chain, after: from, upTo });
      // The sealed event itself too (when retention kept it): the first new one must link to it.
      reads.push({ chain: h.chain, after: from > base ? from - 1 : from, upTo });
    }
    return { ranges, reads };
  }

  async #append(
    after: number | null,
    size: number,
    heads: SealedHeads,
    frontier: MerkleFrontier,
  ): Promise<SealStep> {
    const root = size === 0 ? EMPTY_ROOT_HEX : frontier.root().toString('hex');
    const sealedAt = this.#o.now().toISOString();
    const checkpoint: CheckpointRecord = Object.freeze({
      size,
      heads: Object.freeze(heads),
      root,
      frontier: frontier.toJSON(),
      sealedAt,
      note: checkpointNote(this.#o.signer, this.#logId!, size, root, sealedAt),
    });
    const appended = await this.#o.store.appendCheckpoint(after, checkpoint);
    this.#lastRefusal = null;
    if (!appended) {
      this.#latest = null;
      return 'raced';
    }
    this.#latest = checkpoint;
    return 'sealed';
  }

  #refuse(reason: string): SealStep {
    // Once per distinct reason, not every 250 ms.
    if (reason !== this.#lastRefusal) {
      this.#o.logger?.error(
        { reason },
        'audit sealer: the event log does not verify, nothing sealed (run effectgate audit verify)',
      );
    }
    this.#lastRefusal = reason;
    // The latest checkpoint is read again next round: another gate may have moved on.
    this.#latest = null;
    return 'refused';
  }
}

/**
 * The new events of every range, checked against their chain: seqs without a gap, each hash
 * recomputed, each linked to the one before (the sealed event, or the chain's base). A reason
 * string when one is not.
 */
function checkLinks(
  plan: { readonly ranges: readonly EventRange[]; readonly reads: readonly EventRange[] },
  heads: readonly ChainHead[],
  events: readonly EventRecord[],
): EventRecord[] | string {
  const headOf = new Map(heads.map((h) => [h.chain, h]));
  const byChain = new Map<number, EventRecord[]>();
  for (const e of events) {
    const list = byChain.get(e.chain);
    if (list === undefined) byChain.set(e.chain, [e]);
    else list.push(e);
  }
  const leaves: EventRecord[] = [];
  for (const [i, range] of plan.ranges.entries()) {
    const read = plan.reads[i]!;
    const list = byChain.get(range.chain) ?? [];
    const head = headOf.get(range.chain)!;
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
      prev = range.after === (head.baseSeq ?? 0) ? (head.baseHash ?? GENESIS_HASH) : GENESIS_HASH;
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
  }
  return leaves;
}
