import { eventLeafHash, isChained } from './audit-chain.js';
import { addedRanges, readLeaves } from './checkpoint-leaves.js';
import { checkNoteOf, checkpointOrigin } from './checkpoint-note.js';
import { MerkleFrontier } from './merkle-tree.js';
import type { NoteVerifier } from './signed-note.js';
import type { AuditStore, ChainHead, CheckpointRecord, UnsealedEvents } from './types.js';

/*
 * Verifies the sealed log: every checkpoint's signed note (signature, origin, size, root), and its
 * root recomputed from the events it added to the tree (audit-sealer.ts says which, in which
 * order: its batch's, found again by the snapshots it names, or its chain ranges in the old form).
 * What it finds, by checkpoint:
 *
 * - an event edited or reordered: the events no longer give the checkpoint's root;
 * - an event inserted into a sealed batch: the batch holds more events than the checkpoint sealed;
 * - an event deleted, or moved out of its batch (its `tx` rewritten): a seq the checkpoint sealed
 *   is missing; at the end of a chain, a truncated tail;
 * - a checkpoint row moved by hand: its note, heads, size or frontier disagree with each other;
 * - a checkpoint not signed by the audit key (when a verifier key is given).
 *
 * Events retention removed (below a chain's base) cannot be rehashed: the tree resumes at the
 * first checkpoint after them from that checkpoint's stored frontier, which must give its signed
 * root. It also reports the events not sealed yet and how old the oldest is.
 */

export type AuditLogStore = Pick<
  AuditStore,
  | 'auditLogId'
  | 'chainHeads'
  | 'readEventRanges'
  | 'readBatch'
  | 'latestCheckpoint'
  | 'readCheckpoints'
  | 'unsealedEvents'
>;

export interface SealProblem {
  /** The tree size of the checkpoint concerned. */
  readonly size: number;
  readonly reason: string;
}

export interface SealReport {
  readonly ok: boolean;
  /** Checkpoints examined. */
  readonly checkpoints: number;
  /** Events whose leaves were recomputed. */
  readonly rehashed: number;
  readonly latest: { readonly size: number; readonly sealedAt: string; readonly root: string } | null;
  /** `unchecked`: no verifier key was given, so signatures were not checked (roots still were). */
  readonly signatures: 'checked' | 'unchecked';
  readonly problems: readonly SealProblem[];
  readonly unsealed: UnsealedEvents;
}

const MAX_PROBLEMS = 100;
const PAGE = 100;

/**
 * Verifies every checkpoint up to the latest one at the start. A prune that commits meanwhile can
 * make an intact log look cut: a failing walk is taken again once, as tampering does not go away.
 */
export async function verifySealedLog(
  store: AuditLogStore,
  verifier: NoteVerifier | null,
): Promise<SealReport> {
  const first = await walk(store, verifier);
  return first.ok ? first : walk(store, verifier);
}

async function walk(store: AuditLogStore, verifier: NoteVerifier | null): Promise<SealReport> {
  const origin = checkpointOrigin(await store.auditLogId());
  const latest = await store.latestCheckpoint();
  // Read after the latest checkpoint: heads only move forward, so every sealed seq is at or below them.
  const heads = new Map((await store.chainHeads()).map((h) => [String(h.chain), h]));
  const problems: SealProblem[] = [];
  const problem = (size: number, reason: string): void => {
    if (problems.length < MAX_PROBLEMS) problems.push({ size, reason });
  };
  let count = 0;
  let rehashed = 0;
  let prev: CheckpointRecord | null = null;
  let tree: MerkleFrontier | null = null;
  let after: number | null = null;
  while (latest !== null && (after === null || after < latest.size)) {
    const page = await store.readCheckpoints(after, PAGE);
    if (page.length === 0) break;
    for (const cp of page) {
      if (cp.size > latest.size) break;
      count += 1;
      checkNote(cp, origin, verifier, problem);
      if (prev === null) {
        if (cp.size !== 0)
          problem(cp.size, 'the log has no first checkpoint (size 0): checkpoints were removed by hand');
        tree = storedFrontier(cp, problem);
      } else {
        const result = await extend(store, prev, cp, tree, heads, problem);
        rehashed += result.rehashed;
        tree = result.tree;
      }
      prev = cp;
    }
    after = page[page.length - 1]!.size;
  }
  if (latest !== null) {
    for (const [chain, seq] of Object.entries(latest.heads)) {
      const last = heads.get(chain)?.lastSeq ?? 0;
      if (last < seq)
        problem(latest.size, `tail truncated: chain ${chain} ends at ${last}, sealed up to ${seq}`);
    }
  }
  const unsealed = await store.unsealedEvents(latest);
  return Object.freeze({
    ok: problems.length === 0,
    checkpoints: count,
    rehashed,
    latest: latest === null ? null : { size: latest.size, sealedAt: latest.sealedAt, root: latest.root },
    signatures: verifier === null ? 'unchecked' : 'checked',
    problems: Object.freeze(problems),
    unsealed,
  });
}

type Report = (size: number, reason: string) => void;

function checkNote(
  cp: CheckpointRecord,
  origin: string,
  verifier: NoteVerifier | null,
  problem: Report,
): void {
  const { note, problems } = checkNoteOf(cp.note, origin, verifier);
  for (const p of problems) problem(cp.size, note === null ? `${p}: moved by hand` : p);
  if (note !== null && (note.size !== cp.size || note.rootHex !== cp.root)) {
    problem(cp.size, 'its note does not say its size and root: moved by hand');
  }
}

/** The tree as the checkpoint stored it, if its frontier gives its size and root. */
function storedFrontier(cp: CheckpointRecord, problem: Report): MerkleFrontier | null {
  let tree: MerkleFrontier;
  try {
    tree = MerkleFrontier.fromJSON(cp.frontier);
  } catch (err) {
    problem(cp.size, `its frontier is malformed (${(err as Error).message}): moved by hand`);
    return null;
  }
  const root = tree.root().toString('hex');
  if (tree.size !== cp.size || root !== cp.root) {
    problem(cp.size, 'its frontier does not give its size and root: moved by hand');
    return null;
  }
  return tree;
}

async function extend(
  store: AuditLogStore,
  prev: CheckpointRecord,
  cp: CheckpointRecord,
  tree: MerkleFrontier | null,
  heads: ReadonlyMap<string, ChainHead>,
  problem: Report,
): Promise<{ tree: MerkleFrontier | null; rehashed: number }> {
  const ranges = addedRanges(prev.heads, cp.heads);
  if (typeof ranges === 'string') {
    problem(cp.size, `its heads are not after the previous checkpoint's (${ranges}): moved by hand`);
    return { tree: storedFrontier(cp, problem), rehashed: 0 };
  }
  // Its heads count its chained events; a batch may also hold events without a chain, which no
  // head counts (the old form seals chained events only).
  const added = cp.size - prev.size;
  const chained = ranges.reduce((n, r) => n + (r.upTo - r.after), 0);
  if (cp.batch === null ? chained !== added : chained > added) {
    problem(cp.size, `its heads add ${chained} events, its size ${added}: moved by hand`);
    return { tree: storedFrontier(cp, problem), rehashed: 0 };
  }
  // Retention removed some of them (below a chain's base): resume from the stored frontier.
  const pruned = ranges.some((r) => r.after < (heads.get(String(r.chain))?.baseSeq ?? 0));
  if (pruned || tree === null) return { tree: storedFrontier(cp, problem), rehashed: 0 };
  const leaves = await readLeaves(store, prev, cp, ranges, added);
  if (typeof leaves === 'string') {
    problem(cp.size, leaves);
    return { tree: storedFrontier(cp, () => undefined), rehashed: 0 };
  }
  // Every event its heads say it sealed, each chain's without a gap.
  const events =
    cp.batch === null
      ? leaves.filter(isChained)
      : leaves.filter(isChained).sort((a, b) => a.chain - b.chain || a.seq - b.seq);
  let k = 0;
  for (const r of ranges) {
    for (let seq = r.after + 1; seq <= r.upTo; seq++, k++) {
      const e = events[k];
      if (e === undefined || e.chain !== r.chain || e.seq !== seq) {
        const last = heads.get(String(r.chain))?.lastSeq ?? 0;
        problem(
          cp.size,
          last < seq
            ? `tail truncated: chain ${r.chain} ends at ${last}, this checkpoint sealed up to ${r.upTo}`
            : `event ${seq} of chain ${r.chain} was deleted (inserted or deleted events)`,
        );
        return { tree: storedFrontier(cp, () => undefined), rehashed: 0 };
      }
    }
  }
  // Every other event it sealed: an event without a chain deleted, or moved out of its batch (its
  // `tx` rewritten), leaves the batch short.
  if (leaves.length < added) {
    problem(
      cp.size,
      `it sealed ${added} events, its batch now holds ${leaves.length}: an event was deleted or moved out of it`,
    );
    return { tree: storedFrontier(cp, () => undefined), rehashed: 0 };
  }
  const next = tree.clone();
  for (const e of leaves) next.append(eventLeafHash(e));
  if (next.root().toString('hex') !== cp.root) {
    problem(cp.size, 'its events do not give its root: an event was edited or reordered');
    return { tree: storedFrontier(cp, () => undefined), rehashed: leaves.length };
  }
  if (next.toJSON() !== cp.frontier) problem(cp.size, "its frontier is not the tree's: moved by hand");
  return { tree: next, rehashed: leaves.length };
}
