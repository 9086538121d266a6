import { eventLeafHash, isChained } from './audit-chain.js';
import { type ChainPlan, checkChainLinks, readWithLink } from './chain-links.js';
import { checkpointNote } from './checkpoint-note.js';
import { MerkleFrontier } from './merkle-tree.js';
import { nextBatch } from './next-batch.js';
import { PeriodicRounds } from './periodic-rounds.js';
import type { NoteSigner } from './signed-note.js';
import type {
  AuditStore,
  ChainHead,
  CheckpointBatch,
  CheckpointRecord,
  EventRange,
  EventRecord,
  SealedHeads,
} from './types.js';

/*
 * The sealer folds committed events into one RFC 9162 Merkle tree and appends a signed checkpoint
 * of it (audit_checkpoints), off the hot path: it reads what is committed and writes one row, and
 * a gate's calls never wait for it.
 *
 * It reads the log in batches by snapshot, as the projection does (migrations 0024, 0026): a batch
 * is the events its target snapshot sees and the previous batch's did not, in `pos` order. An
 * event is seen by a snapshot exactly when its writer has committed, so no committed event is
 * passed over for one that commits later, and nothing is waited for. A checkpoint names its batch
 * (CheckpointBatch), and one takes at most `maxEvents` of it: a longer batch goes on in the next.
 * Events written before the store gave them an order (no `tx`) are sealed first, by chain, as the
 * versions before sealed every event: the events after the previous checkpoint's heads up to the
 * chains' heads, in (chain, seq) order.
 *
 * Before folding an event in, the sealer checks its chain link and hash: it never signs a log that
 * does not verify (it logs why, and tries again on its next round, so a repaired log or one
 * retention moved on is sealed). Gates sharing a database each run one; eg_append_checkpoint keeps
 * their checkpoints one line (the loser of a race rereads and goes on from the winner's).
 */

export type SealerStore = Pick<
  AuditStore,
  | 'auditLogId'
  | 'chainHeads'
  | 'readEventRanges'
  | 'readBatch'
  | 'hasUnsealedLegacy'
  | 'latestCheckpoint'
  | 'appendCheckpoint'
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
   * Most events one checkpoint takes; default 4,096 (a few MB read), so a long backlog (an
   * upgraded store, a store sealed for the first time) is many small rounds that calls interleave
   * with, not one read that stalls an embedded store. By chain, each chain's share of it.
   */
  readonly maxEvents?: number;
  readonly logger?: SealerLogger;
  /** The clock of `sealedAt` (tests). */
  readonly now?: () => Date;
}

/** What one round did. */
export type SealStep = 'sealed' | 'idle' | 'raced' | 'refused';

/** Most rounds one `seal()` runs: a backlog beyond (rounds × maxEvents) waits for the next. */
const MAX_ROUNDS = 1000;

export class AuditSealer {
  readonly #o: Required<Omit<AuditSealerOptions, 'logger'>> & { readonly logger: SealerLogger | null };
  #logId: string | null = null;
  #latest: CheckpointRecord | null = null;
  readonly #rounds: PeriodicRounds;
  #lastRefusal: string | null = null;
  /** The last round left events behind: more than maxEvents were new, or it sealed by chain. */
  #behind = false;
  /** Every event without a `tx` is sealed: no need to ask again while the log is of the old form. */
  #byChainDone = false;

  constructor(options: AuditSealerOptions) {
    this.#o = Object.freeze({
      store: options.store,
      signer: options.signer,
      intervalMs: options.intervalMs ?? 250,
      maxEvents: options.maxEvents ?? 4096,
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
   * Seals until a round takes the rest of what it saw (bounded); returns checkpoints written. A
   * round that took every new event ends it: under a steady load that is one
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
      // The events already there (with a chain or without) are sealed by the rounds that follow,
      // in the same seal(); a round that finds none is idle.
      this.#behind = true;
      return this.#append(null, 0, bases, null, MerkleFrontier.empty());
    }
    if (latest.batch === null) {
      // A long backlog (a store sealed for the first time) goes by chain too: a round reads each
      // chain's next events by primary key, where a round of the first batch reads all of the
      // backlog to take its next events by `pos`.
      const backlog = heads.reduce(
        (n, h) => n + Math.max(0, h.lastSeq - (latest.heads[String(h.chain)] ?? 0)),
        0,
      );
      if (backlog > this.#o.maxEvents) return this.#sealByChain(latest, heads);
      if (!this.#byChainDone && (await store.hasUnsealedLegacy(latest.heads))) {
        return this.#sealByChain(latest, heads);
      }
      this.#byChainDone = true;
    }
    return this.#sealBatch(latest, heads);
  }

  /** A round of the old form: the events after the sealed heads up to the chains' heads. */
  async #sealByChain(latest: CheckpointRecord, heads: readonly ChainHead[]): Promise<SealStep> {
    const plan = this.#plan(latest.heads, heads);
    if (typeof plan === 'string') return this.#refuse(plan);
    if (plan.ranges.length === 0) return 'idle';
    const events = await this.#o.store.readEventRanges(plan.reads);
    const leaves = checkChainLinks(plan, heads, events);
    if (typeof leaves === 'string') return this.#refuse(leaves);
    const next: Record<string, number> = { ...latest.heads };
    for (const r of plan.ranges) next[String(r.chain)] = r.upTo;
    // Events appended since the heads were read are the next rounds', by chain or by snapshot.
    this.#behind = true;
    return this.#extend(latest, leaves, next, null);
  }

  /**
   * A round by snapshot: the rest of the batch the latest checkpoint left unfinished, else the
   * next one (after its target, up to the store's current snapshot), at most maxEvents of it.
   */
  async #sealBatch(latest: CheckpointRecord, heads: readonly ChainHead[]): Promise<SealStep> {
    const read = nextBatch(latest.batch);
    const max = this.#o.maxEvents;
    // One more than it takes: a checkpoint that ends a batch early always leaves some of it.
    const got = await this.#o.store.readBatch({ ...read, limit: max + 1, sealed: latest.heads });
    if (got.events.length === 0) return 'idle';
    const taken = got.events.slice(0, max);
    const more = got.events.length > max;
    // A round that finished a batch an earlier one started saw less than what is committed now.
    this.#behind = more || read.from > 0;
    const checked = await this.#checkBatch(latest.heads, heads, taken);
    if (typeof checked === 'string') return this.#refuse(checked);
    // A new batch taken whole holds every chained event the heads count (they were read before
    // its snapshot was taken): a chain its events end short of was cut by hand, an event deleted
    // or its chain fields cleared so that it would pass for one without a chain.
    const short =
      read.target === null && !more
        ? heads.find((h) => (checked[String(h.chain)] ?? 0) < h.lastSeq)
        : undefined;
    if (short !== undefined) {
      return this.#refuse(
        `chain ${short.chain} counts ${short.lastSeq} events, its sealed ones end at ${checked[String(short.chain)] ?? 0}: an event was removed or its chain cleared`,
      );
    }
    const batch: CheckpointBatch = Object.freeze({
      after: read.after,
      target: got.target,
      through: more ? got.positions[max - 1]! : null,
    });
    return this.#extend(latest, taken, checked, batch);
  }

  /**
   * The ranges of every chain from its sealed seq up to its head, each chain's share of maxEvents
   * at most, or a reason the heads cannot be sealed from.
   */
  #plan(sealed: SealedHeads, heads: readonly ChainHead[]): ChainPlan | string {
    const perChain = Math.max(1, Math.floor(this.#o.maxEvents / Math.max(1, heads.length)));
    const ranges: EventRange[] = [];
    const reads: EventRange[] = [];
    for (const h of heads) {
      const from = sealed[String(h.chain)] ?? 0;
      const base = h.baseSeq ?? 0;
      if (from > h.lastSeq) return `chain ${h.chain} ends at ${h.lastSeq}, before its sealed event ${from}`;
      if (from < base) return `chain ${h.chain} was pruned to ${base}, past its sealed event ${from}`;
      const upTo = Math.min(h.lastSeq, from + perChain);
      if (upTo === from) continue;
      const range = { chain: h.chain, after: from, upTo };
      ranges.push(range);
      reads.push(readWithLink(range, base));
    }
    return { ranges, reads };
  }

  /**
   * The heads after a batch, or a reason it cannot be sealed. While an event's head row is locked
   * until it commits, a batch holds, on every chain, the events right after its sealed seq: each
   * is checked against its chain as the old form's ranges are. An event without a chain has no
   * link or hash to check: its leaf is all that protects it once sealed.
   */
  async #checkBatch(
    sealed: SealedHeads,
    heads: readonly ChainHead[],
    events: readonly EventRecord[],
  ): Promise<SealedHeads | string> {
    const chained = events.filter(isChained);
    const upTo = new Map<number, number>();
    for (const e of chained) upTo.set(e.chain, Math.max(upTo.get(e.chain) ?? 0, e.seq));
    const baseOf = new Map(heads.map((h) => [h.chain, h.baseSeq ?? 0]));
    const ranges: EventRange[] = [...upTo]
      .sort((a, b) => a[0] - b[0])
      .map(([chain, last]) => ({ chain, after: sealed[String(chain)] ?? 0, upTo: last }));
    const reads = ranges.map((r) => readWithLink(r, baseOf.get(r.chain) ?? 0));
    // The batch holds the ranges' events; only their links (each chain's sealed event) are read.
    const links = reads
      .filter((read, i) => read.after < ranges[i]!.after)
      .map((read) => ({ ...read, upTo: read.after + 1 }));
    const linkEvents = await this.#o.store.readEventRanges(links);
    const byChainSeq = [...linkEvents, ...chained].sort((a, b) => a.chain - b.chain || a.seq - b.seq);
    const checked = checkChainLinks({ ranges, reads }, heads, byChainSeq);
    if (typeof checked === 'string') return checked;
    const next: Record<string, number> = { ...sealed };
    for (const r of ranges) next[String(r.chain)] = r.upTo;
    return next;
  }

  /** Appends `leaves` to the latest checkpoint's tree and the checkpoint of the result. */
  #extend(
    latest: CheckpointRecord,
    leaves: readonly EventRecord[],
    heads: SealedHeads,
    batch: CheckpointBatch | null,
  ): Promise<SealStep> {
    const frontier = MerkleFrontier.fromJSON(latest.frontier);
    for (const event of leaves) frontier.append(eventLeafHash(event));
    return this.#append(latest.size, latest.size + leaves.length, heads, batch, frontier);
  }

  async #append(
    after: number | null,
    size: number,
    heads: SealedHeads,
    batch: CheckpointBatch | null,
    frontier: MerkleFrontier,
  ): Promise<SealStep> {
    const root = frontier.root().toString('hex');
    const sealedAt = this.#o.now().toISOString();
    const checkpoint: CheckpointRecord = Object.freeze({
      size,
      heads: Object.freeze(heads),
      batch,
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
