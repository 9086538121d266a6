import { open } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { type AuditReport, eventLeafHash, verifyChain } from './audit-chain.js';
import {
  AUDIT_EXPORT_VERSION,
  AuditExportError,
  type AuditExportHeader,
  type ExportLatest,
  parseBodyLine,
  parseHeader,
} from './audit-export-lines.js';
import type { SealProblem } from './audit-log-verify.js';
import { type CheckpointNote, checkNoteOf } from './checkpoint-note.js';
import { MerkleFrontier } from './merkle-tree.js';
import type { NoteVerifier } from './signed-note.js';
import type { ChainedEvent } from './types.js';
import { judgeWitness, readWitnessNote, type WitnessCheck } from './witness-check.js';

/*
 * Verifies an export offline, streaming (memory does not grow with the log): every chain's links
 * from its base to its last event, with the very `verifyChain` the store verifier uses; and, in a
 * version 3 file, the sealed log: the tree rebuilt from the header's frontier and the events in
 * file order, every checkpoint's root and size found again, its note of this log and (given the
 * verifier key) signed by the audit key, and each checkpoint a witness kept held by the file.
 *
 * What a file alone cannot show is a file rewritten wholesale and re-signed, or cut at a
 * checkpoint: the signature settles the first (only the audit key signs), and comparing the
 * latest checkpoint with the store's or a witness's (`--witness`) the second.
 */

/** What the checkpoints of a version 3 export say. */
export interface ExportSealReport {
  readonly checkpoints: number;
  /** Events the file's checkpoints sealed after its first, each rehashed into the tree. */
  readonly sealed: number;
  /** Events kept from before the file's first checkpoint: checked by their chain only. */
  readonly before: number;
  /** Events after the last checkpoint (not sealed yet): checked by their chain only. */
  readonly unsealed: number;
  /**
   * The checkpoint the file starts at (size 0: the whole history; later: the archive or the log
   * after a prune, which the archive before it ends with).
   */
  readonly first: { readonly size: number; readonly root: string } | null;
  readonly latest: { readonly size: number; readonly root: string; readonly sealedAt: string | null } | null;
  /** `unchecked`: no verifier key was given, so signatures were not checked (roots still were). */
  readonly signatures: 'checked' | 'unchecked';
  readonly problems: readonly SealProblem[];
  /** One per witness note given, in order. */
  readonly witnessed: readonly WitnessCheck[];
}

/** `verifyChain`'s report over an export, when it was taken, and (version 3) its seal. */
export interface AuditExportReport extends AuditReport {
  readonly exportedAt: string;
  readonly version: AuditExportHeader['version'];
  /** Null for versions 1 and 2, which hold no checkpoints. */
  readonly seal: ExportSealReport | null;
}

export interface VerifyExportOptions {
  /** The audit key's verifier: every checkpoint must be signed by it. */
  readonly verifier?: NoteVerifier | null;
  /** Checkpoint notes witnesses kept (`audit checkpoint`): each must be one of the file's. */
  readonly witnesses?: readonly string[];
}

const MAX_PROBLEMS = 100;

/**
 * Verifies an export given as its lines (without line ends). Throws `AuditExportError` (with the
 * line) when a line is not an export line at all; broken chains and checkpoints are in the report.
 */
export async function verifyAuditExport(
  lines: AsyncIterable<string> | Iterable<string>,
  options: VerifyExportOptions = {},
): Promise<AuditExportReport> {
  const numbered = numberedLines(lines);
  try {
    const first = await numbered.next();
    if (first.done) throw new AuditExportError(1, 'empty file: expected the effectgate-audit header line');
    const header = parseHeader(first.value.text);
    const v3 = header.version === AUDIT_EXPORT_VERSION;
    if (!v3 && ((options.verifier ?? null) !== null || (options.witnesses ?? []).length > 0)) {
      throw new AuditExportError(
        1,
        `a version ${header.version} export holds no checkpoints: signatures and witnesses are checked in version ${AUDIT_EXPORT_VERSION}`,
      );
    }
    const seal = v3 ? new SealWalk(header, options) : null;
    async function* events(): AsyncGenerator<ChainedEvent, void, undefined> {
      for (;;) {
        const next = await numbered.next();
        if (next.done) return;
        const parsed = parseBodyLine(next.value.text, next.value.line, v3);
        if ('checkpoint' in parsed) seal!.checkpoint(parsed.checkpoint, next.value.line);
        else {
          seal?.event(parsed, next.value.line);
          yield parsed;
        }
      }
    }
    const report = await verifyChain(events(), header.heads);
    const sealed = seal?.report() ?? null;
    const ok =
      report.ok && (sealed === null || (sealed.problems.length === 0 && sealed.witnessed.every((w) => w.ok)));
    return { ...report, ok, exportedAt: header.exported_at, version: header.version, seal: sealed };
  } finally {
    await numbered.return(undefined);
  }
}

/** The sealed log of a version 3 file, rebuilt line by line. */
class SealWalk {
  readonly #origin: string;
  readonly #verifier: NoteVerifier | null;
  readonly #tree: MerkleFrontier | null;
  /** The header's last checkpoint, which the file's last checkpoint line must be. */
  readonly #ends: ExportLatest | null;
  readonly #witnesses: readonly (CheckpointNote | WitnessCheck)[];
  /** The file's root at each size a witness asks about (only those: a year is millions of checkpoints). */
  readonly #held = new Map<number, string>();
  readonly #problems: SealProblem[] = [];
  #checkpoints = 0;
  #before = 0;
  #sealed = 0;
  /** Events since the last checkpoint line: sealed by the next one, or, at the end, not sealed yet. */
  #pending = 0;
  #first: ExportSealReport['first'] = null;
  #latest: ExportSealReport['latest'] = null;
  /** Set once a root was not found again: every later one would differ too, and says nothing new. */
  #diverged = false;

  constructor(header: AuditExportHeader, options: VerifyExportOptions) {
    this.#origin = header.origin!;
    this.#verifier = options.verifier ?? null;
    this.#tree = header.tree == null ? null : MerkleFrontier.fromJSON(JSON.stringify(header.tree));
    this.#ends = header.latest ?? null;
    this.#witnesses = (options.witnesses ?? []).map((note) => readWitnessNote(note, this.#verifier));
  }

  event(e: ChainedEvent, line: number): void {
    // Before the first checkpoint: sealed earlier, by checkpoints the file starts after.
    if (this.#tree !== null && this.#checkpoints === 0) {
      this.#before += 1;
      return;
    }
    try {
      this.#tree?.append(eventLeafHash(e));
    } catch (err) {
      // Only a header whose tree is already 2^53 - 1 leaves: not a tree any log has.
      throw new AuditExportError(line, `the tree cannot take this event (${(err as Error).message})`);
    }
    this.#pending += 1;
  }

  checkpoint(text: string, line: number): void {
    const tree = this.#tree;
    if (tree === null)
      throw new AuditExportError(line, 'a checkpoint, but the header says the file holds none (tree null)');
    this.#checkpoints += 1;
    const first = this.#checkpoints === 1;
    this.#sealed += this.#pending;
    this.#pending = 0;
    const { note, problems } = checkNoteOf(text, this.#origin, this.#verifier);
    for (const p of problems)
      this.#problem(note?.size ?? tree.size, note === null ? `line ${line}: ${p}` : p);
    if (note === null) return;
    if (this.#latest !== null && note.size <= this.#latest.size) {
      this.#problem(
        note.size,
        `it comes after checkpoint ${this.#latest.size}: checkpoint lines reordered or repeated`,
      );
    }
    const root = tree.root().toString('hex');
    if (!this.#diverged && (note.size !== tree.size || note.rootHex !== root)) {
      this.#diverged = true;
      this.#problem(
        note.size,
        first
          ? "the header's tree is not its first checkpoint's: the file was rewritten"
          : note.size !== tree.size
            ? `it sealed ${note.size} events, the file holds ${tree.size} by then: events were inserted or deleted`
            : 'the events before it do not give its root: an event was edited or reordered',
      );
    }
    // A root found again only: past a root that was not, the file's checkpoints prove nothing.
    if (!this.#diverged && this.#witnesses.some((w) => w.size === note.size)) {
      this.#held.set(note.size, note.rootHex);
    }
    this.#latest = { size: note.size, root: note.rootHex, sealedAt: note.sealedAt };
    if (first) this.#first = { size: note.size, root: note.rootHex };
  }

  report(): ExportSealReport {
    const tree = this.#tree;
    if (tree !== null && this.#checkpoints === 0)
      this.#problem(tree.size, 'the header starts a tree, but the file holds no checkpoint: cut short');
    const ends = this.#ends;
    const latest = this.#latest;
    if (ends !== null && this.#checkpoints > 0 && (latest?.size !== ends.size || latest.root !== ends.root)) {
      this.#problem(
        ends.size,
        `the file's last checkpoint is ${latest?.size ?? 'unreadable'}, its header's ${ends.size}: cut short`,
      );
    }
    // Asked to check signatures, and nothing in the file is signed: say so rather than pass.
    if (tree === null && this.#verifier !== null)
      this.#problem(0, 'the file holds no checkpoint: nothing in it is signed by the audit key');
    return Object.freeze({
      checkpoints: this.#checkpoints,
      sealed: this.#sealed,
      before: this.#before,
      unsealed: this.#pending,
      first: this.#first,
      latest: this.#latest,
      signatures: this.#verifier === null ? 'unchecked' : 'checked',
      problems: Object.freeze([...this.#problems]),
      witnessed: Object.freeze(this.#witnesses.map((w) => this.#witnessed(w))),
    });
  }

  #witnessed(w: CheckpointNote | WitnessCheck): WitnessCheck {
    if (!('rootHex' in w)) return w;
    return judgeWitness(w, this.#verifier, {
      holder: 'file',
      origin: this.#origin,
      rootAtSize: this.#held.get(w.size) ?? null,
      latestSize: this.#latest?.size ?? null,
    });
  }

  #problem(size: number, reason: string): void {
    if (this.#problems.length < MAX_PROBLEMS) this.#problems.push({ size, reason });
  }
}

/** `verifyAuditExport` over a file, read line by line. File system errors are thrown as they are. */
export async function verifyAuditExportFile(
  path: string,
  options: VerifyExportOptions = {},
): Promise<AuditExportReport> {
  const handle = await open(path, 'r');
  const input = handle.createReadStream({ encoding: 'utf8' });
  const lines = createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY });
  // A read error (e.g. EISDIR) ends the lines early: surface it rather than a truncated tail.
  let readError: Error | null = null;
  input.on('error', (err) => {
    readError ??= err;
    lines.close();
  });
  try {
    const report = await verifyAuditExport(lines, options);
    if (readError !== null) throw readError;
    return report;
  } catch (err) {
    throw readError ?? err;
  } finally {
    lines.close();
    input.destroy();
  }
}

async function* numberedLines(
  lines: AsyncIterable<string> | Iterable<string>,
): AsyncGenerator<{ readonly line: number; readonly text: string }, void, undefined> {
  let line = 0;
  for await (const text of lines) {
    line += 1;
    yield { line, text };
  }
}
