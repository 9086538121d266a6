import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { EffectgateError } from '../errors.js';
import { EVENT_CHAINS, GENESIS_HASH, isChained } from './audit-chain.js';
import {
  AUDIT_EXPORT_FORMAT,
  AUDIT_EXPORT_VERSION,
  type AuditExportHeader,
  type ExportTree,
  eventLine,
} from './audit-export-lines.js';
import { addedRanges, readLeaves } from './checkpoint-leaves.js';
import { checkpointOrigin } from './checkpoint-note.js';
import { storeEvents } from './store-events.js';
import type { AuditStore, ChainCut, ChainHead, CheckpointRecord, EventRecord, SealedHeads } from './types.js';

export * from './audit-export-lines.js';

/*
 * The sealed log as JSON Lines, for keeping or handing over (version 3; audit-export-verify.ts
 * checks it offline, and still reads versions 1 and 2, which held the chains only):
 *
 *   line 1   {"format":"effectgate-audit","version":3,"exported_at":ISO,"chains":64,
 *             "heads":[{"chain":0,"baseSeq":…,"baseHash":…,"lastSeq":…,"lastHash":…},…],
 *             "origin":"effectgate/audit/<log id>","tree":{"size":N,"hashes":[…]}|null,
 *             "latest":{"size":N,"root":"<hex>"}|null}
 *   then     events, each {"chain":…,"seq":…,"type":…,"operationId":…|null,"recordedAtUs":"…",
 *             "payload":"…","prevHash":…,"hash":…} exactly as stored, and checkpoints, each
 *             {"checkpoint":"<its signed note>"}, in the order the log was sealed:
 *
 *   - the events kept from before the first checkpoint (sealed by checkpoints whose other events
 *     retention removed; empty for a store pruned at checkpoints);
 *   - the first checkpoint: the tree of the header (`tree`, its frontier) has its size and root;
 *   - for every later checkpoint, the events it added to the tree, in the order it added them
 *     (its leaves), then the checkpoint;
 *   - the events not sealed yet, by chain (a whole export only; an archive ends at a checkpoint).
 *
 * So a verifier rebuilds every checkpoint's root from the file and checks its signed note, with
 * the audit key's verifier key and any checkpoint a witness kept; and, as before, every chain's
 * links from its base to its last event (the header's heads). The file's last checkpoint line must
 * be the header's `latest`, so a file cut short shows. `tree` and `latest` are null when the store
 * has no checkpoint (no gate sealed it): every event is then unsealed, checked by its chain only.
 */

export interface AuditExportOptions {
  /** Events read per `readEvents` call (keyset paging): memory stays flat however long the log. */
  readonly pageSize?: number;
  /** The `exported_at` of the header (tests); default now. */
  readonly now?: Date;
  /**
   * A retention archive (audit-retention.ts): every chain's events up to its cut (`cuts`, every
   * chain's, standing as the header's heads), which are the checkpoint `until`'s heads, with no
   * unsealed events; `until` null: a log never sealed, cut by time, whose archive holds chains
   * only. Default: the whole kept log, up to the latest checkpoint and past it.
   */
  readonly segment?: { readonly until: CheckpointRecord | null; readonly cuts: readonly ChainCut[] };
}

export type AuditExportStore = Pick<
  AuditStore,
  | 'auditLogId'
  | 'readEvents'
  | 'chainHeads'
  | 'latestCheckpoint'
  | 'readCheckpoints'
  | 'readEventRanges'
  | 'readBatch'
  | 'hasUnchainedEvents'
>;

type Part = { readonly kind: 'header' | 'event' | 'checkpoint'; readonly line: string };

/** The export, line by line (each ending in `\n`), read lazily checkpoint by checkpoint. */
export async function* auditExportLines(
  store: AuditExportStore,
  options: AuditExportOptions = {},
): AsyncGenerator<string, void, undefined> {
  for await (const part of exportParts(store, options)) yield part.line;
}

/**
 * Writes the export to `out` with backpressure, without ending it (the caller owns `out`, e.g.
 * stdout). Returns how many events and checkpoints it wrote.
 */
export async function writeAuditExport(
  store: AuditExportStore,
  out: NodeJS.WritableStream,
  options: AuditExportOptions = {},
): Promise<{ readonly events: number; readonly checkpoints: number }> {
  let events = 0;
  let checkpoints = 0;
  async function* counted(): AsyncGenerator<string, void, undefined> {
    for await (const part of exportParts(store, options)) {
      if (part.kind === 'event') events += 1;
      if (part.kind === 'checkpoint') checkpoints += 1;
      yield part.line;
    }
  }
  await pipeline(Readable.from(counted()), out, { end: false });
  return { events, checkpoints };
}

const PAGE = 100;

async function* exportParts(
  store: AuditExportStore,
  options: AuditExportOptions,
): AsyncGenerator<Part, void, undefined> {
  const paging = options.pageSize === undefined ? {} : { pageSize: options.pageSize };
  // This format carries chained events only, and reads the unsealed ones by chain: a log holding
  // an event without one (sealed or not) is refused whole, never written without it.
  if (await store.hasUnchainedEvents()) throw unchained();
  const origin = checkpointOrigin(await store.auditLogId());
  // The end before the heads: heads only move forward, so every event it sealed is at or below them.
  const end = options.segment === undefined ? await store.latestCheckpoint() : options.segment.until;
  const heads =
    options.segment === undefined
      ? (await store.chainHeads()).map(keptHead)
      : options.segment.cuts.map(cutHead);
  const start = end === null ? null : await firstCheckpoint(store, heads, end);
  const header: AuditExportHeader = {
    format: AUDIT_EXPORT_FORMAT,
    version: AUDIT_EXPORT_VERSION,
    exported_at: (options.now ?? new Date()).toISOString(),
    chains: EVENT_CHAINS,
    heads,
    origin,
    tree: start === null ? null : (JSON.parse(start.frontier) as ExportTree),
    latest: end === null ? null : { size: end.size, root: end.root },
  };
  yield { kind: 'header', line: `${JSON.stringify(header)}\n` };
  if (start === null || end === null) {
    for await (const e of chainSegments(store, heads, {}, null, paging)) yield event(e);
    return;
  }
  for await (const e of chainSegments(store, heads, {}, start.heads, paging)) yield event(e);
  yield checkpoint(start);
  let prev = start;
  for await (const cp of checkpointsAfter(store, start.size, end.size)) {
    for (const e of await leavesOf(store, prev, cp)) yield event(e);
    yield checkpoint(cp);
    prev = cp;
  }
  if (prev.size !== end.size) throw broken(end.size, 'the store no longer holds this checkpoint');
  if (options.segment === undefined) {
    for await (const e of chainSegments(store, heads, end.heads, null, paging)) yield event(e);
  }
}

function event(e: EventRecord): Part {
  // One written after the check above began (a later version's gate running meanwhile).
  if (!isChained(e)) throw unchained();
  return { kind: 'event', line: eventLine(e) };
}

/** An event without a chain is written by a later version, whose export writes it too. */
function unchained(): EffectgateError {
  return new EffectgateError(
    'EG_ERR_STORE_SCHEMA_NEWER',
    'the log holds an event without a chain, which this effectgate cannot export: export it with the version that wrote it',
  );
}

function checkpoint(cp: CheckpointRecord): Part {
  return { kind: 'checkpoint', line: `${JSON.stringify({ checkpoint: cp.note })}\n` };
}

function keptHead(h: ChainHead): ChainHead {
  const base = { seq: h.baseSeq ?? 0, hash: h.baseHash ?? GENESIS_HASH };
  return { chain: h.chain, baseSeq: base.seq, baseHash: base.hash, lastSeq: h.lastSeq, lastHash: h.lastHash };
}

function cutHead(c: ChainCut): ChainHead {
  return { chain: c.chain, baseSeq: c.baseSeq, baseHash: c.baseHash, lastSeq: c.cutSeq, lastHash: c.cutHash };
}

/**
 * The file's first checkpoint: the first whose events cover every chain's base, so each later one
 * added only events still kept. Retention cuts at a checkpoint, which is then this one; a store an
 * earlier version pruned by time starts at the first checkpoint past its cuts.
 */
async function firstCheckpoint(
  store: AuditExportStore,
  heads: readonly ChainHead[],
  end: CheckpointRecord,
): Promise<CheckpointRecord> {
  for await (const cp of checkpointsAfter(store, null, end.size)) {
    if (heads.every((h) => (cp.heads[String(h.chain)] ?? 0) >= (h.baseSeq ?? 0))) return cp;
  }
  throw broken(end.size, 'no checkpoint up to this one covers the events retention removed');
}

/** The checkpoints after size `after` (null: all) up to size `upTo`, page by page. */
async function* checkpointsAfter(
  store: AuditExportStore,
  after: number | null,
  upTo: number,
): AsyncGenerator<CheckpointRecord, void, undefined> {
  let from = after;
  for (;;) {
    const page = await store.readCheckpoints(from, PAGE);
    for (const cp of page) {
      if (cp.size > upTo) return;
      yield cp;
    }
    if (page.length < PAGE) return;
    from = page[page.length - 1]!.size;
  }
}

/** The leaves `cp` added after `prev`, as `audit verify` finds them; a log they cannot be read from is refused. */
async function leavesOf(
  store: AuditExportStore,
  prev: CheckpointRecord,
  cp: CheckpointRecord,
): Promise<readonly EventRecord[]> {
  const ranges = addedRanges(prev.heads, cp.heads);
  if (typeof ranges === 'string') throw broken(cp.size, ranges);
  // As `audit verify` counts them: a batch may hold events without a chain, which no head counts.
  const added = cp.size - prev.size;
  const chained = ranges.reduce((n, r) => n + (r.upTo - r.after), 0);
  if (cp.batch === null ? chained !== added : chained > added)
    throw broken(cp.size, `its heads add ${chained} events, its size ${added}`);
  // An event edited or deleted is written as the store holds it: the file's verifier finds it.
  const leaves = await readLeaves(store, prev, cp, ranges, added);
  if (typeof leaves === 'string') throw broken(cp.size, leaves);
  return leaves;
}

/** Every chain's events after `from` (its base at least) up to `upTo` (its last when null), by chain. */
async function* chainSegments(
  store: AuditExportStore,
  heads: readonly ChainHead[],
  from: SealedHeads,
  upTo: SealedHeads | null,
  paging: { readonly pageSize?: number },
): AsyncGenerator<EventRecord, void, undefined> {
  for (const h of [...heads].sort((a, b) => a.chain - b.chain)) {
    const after = Math.max(h.baseSeq ?? 0, from[String(h.chain)] ?? 0);
    const last = upTo === null ? h.lastSeq : Math.min(h.lastSeq, upTo[String(h.chain)] ?? 0);
    if (last <= after) continue;
    yield* storeEvents(store, { ...paging, chain: h.chain, after, upTo: last });
  }
}

function broken(size: number, reason: string): EffectgateError {
  return new EffectgateError(
    'EG_ERR_AUDIT_CHAIN_BROKEN',
    `the sealed log does not verify at checkpoint ${size} (${reason}): nothing exported past it; run effectgate audit verify`,
  );
}
