import { open } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { EffectgateError } from '../errors.js';
import { type AuditReport, EVENT_CHAINS, GENESIS_HASH, verifyChain } from './audit-chain.js';
import { storeEvents, upToHeads } from './store-events.js';
import type { AuditStore, ChainCut, ChainHead, EventRecord } from './types.js';

/*
 * The event log as JSON Lines, for keeping or handing over, and its offline verifier.
 *
 *   line 1   {"format":"effectgate-audit","version":2,"exported_at":ISO,"chains":64,
 *             "heads":[{"chain":0,"baseSeq":…,"baseHash":…,"lastSeq":…,"lastHash":…},…]}
 *   line 2…  {"chain":…,"seq":…,"type":…,"operationId":…|null,"recordedAtUs":"…","payload":"…",
 *             "prevHash":…,"hash":…}   one per event, exactly as stored, in (chain, seq) order
 *
 * `payload` is the exact JSON text that was hashed, as a string (never re-serialized), and
 * `recordedAtUs` a decimal string, so `computeEventHash` over a line gives the stored hash.
 *
 * Each chain's events run from baseSeq + 1 (linked to baseHash) to lastSeq: the whole kept chain,
 * or, for a retention archive (audit-retention.ts), the segment removed from the store, whose last
 * event is the store's new base. Version 1 files (no base: every chain from seq 1) still verify.
 *
 * The file is checked with the very `verifyChain` the store verifier uses, the header's heads
 * standing in for the head rows: an edited, deleted, inserted, reordered or moved event, and a
 * truncated tail, are found per chain. What an offline file cannot show is a file rewritten
 * wholesale (every hash and head recomputed): compare its heads with the store's, or with heads
 * kept elsewhere, for that.
 */

export const AUDIT_EXPORT_FORMAT = 'effectgate-audit';
export const AUDIT_EXPORT_VERSION = 2;

/** The first line of an export. */
export interface AuditExportHeader {
  readonly format: typeof AUDIT_EXPORT_FORMAT;
  readonly version: 1 | typeof AUDIT_EXPORT_VERSION;
  readonly exported_at: string;
  readonly chains: number;
  readonly heads: readonly ChainHead[];
}

/** `verifyChain`'s report over an export, plus when the export was taken. */
export interface AuditExportReport extends AuditReport {
  readonly exportedAt: string;
}

/**
 * An export that cannot be read as one: `line` is 1-based. Not `EG_ERR_AUDIT_CHAIN_BROKEN`: that
 * is evidence of tampering with events, this only says the file is not an export at all.
 */
export class AuditExportError extends EffectgateError {
  readonly line: number;
  readonly detail: string;

  constructor(line: number, detail: string) {
    super('EG_ERR_AUDIT_EXPORT_INVALID', `line ${line}: ${detail}`);
    this.name = 'AuditExportError';
    this.line = line;
    this.detail = detail;
  }
}

export interface AuditExportOptions {
  /** Events read per `readEvents` call (keyset paging): memory stays flat however long the log. */
  readonly pageSize?: number;
  /** The `exported_at` of the header (tests); default now. */
  readonly now?: Date;
  /**
   * A retention archive: only each chain's events after its base up to its cut, the cuts standing
   * as the header's heads (audit-retention.ts). Default: every kept event, up to the heads.
   */
  readonly segment?: readonly ChainCut[];
}

/**
 * The export, line by line (each ending in `\n`), read lazily page by page.
 *
 * The heads are read first, in one statement, and only the events up to its chain's head are
 * exported: events a running gate appends meanwhile have a higher seq than the exported head of
 * their chain and are left out, so the file is self-consistent (every chain ends exactly at its
 * exported head) and verifies without knowing about them. Events on a chain without a head row
 * are kept, as the store verifier keeps them, so the file verifier reports the missing row.
 */
export async function* auditExportLines(
  store: Pick<AuditStore, 'readEvents' | 'chainHeads'>,
  options: AuditExportOptions = {},
): AsyncGenerator<string, void, undefined> {
  const segment = options.segment;
  const heads: readonly ChainHead[] =
    segment === undefined
      ? await store.chainHeads()
      : segment.map((c) => ({
          chain: c.chain,
          baseSeq: c.baseSeq,
          baseHash: c.baseHash,
          lastSeq: c.cutSeq,
          lastHash: c.cutHash,
        }));
  const header: AuditExportHeader = {
    format: AUDIT_EXPORT_FORMAT,
    version: AUDIT_EXPORT_VERSION,
    exported_at: (options.now ?? new Date()).toISOString(),
    chains: EVENT_CHAINS,
    heads: heads.map((h) => ({
      chain: h.chain,
      baseSeq: h.baseSeq ?? 0,
      baseHash: h.baseHash ?? GENESIS_HASH,
      lastSeq: h.lastSeq,
      lastHash: h.lastHash,
    })),
  };
  yield `${JSON.stringify(header)}\n`;
  const pageSize = options.pageSize === undefined ? {} : { pageSize: options.pageSize };
  const events =
    segment === undefined
      ? upToHeads(storeEvents(store, pageSize), heads)
      : segmentEvents(store, segment, pageSize);
  for await (const e of events) {
    const line: EventRecord = {
      chain: e.chain,
      seq: e.seq,
      type: e.type,
      operationId: e.operationId,
      recordedAtUs: e.recordedAtUs,
      payload: e.payload,
      prevHash: e.prevHash,
      hash: e.hash,
    };
    yield `${JSON.stringify(line)}\n`;
  }
}

/** Each cut chain's events after its base up to its cut, chain by chain, reading no further. */
async function* segmentEvents(
  store: Pick<AuditStore, 'readEvents'>,
  cuts: readonly ChainCut[],
  paging: { readonly pageSize?: number },
): AsyncGenerator<EventRecord, void, undefined> {
  for (const cut of [...cuts].sort((a, b) => a.chain - b.chain)) {
    if (cut.cutSeq <= cut.baseSeq) continue;
    for await (const e of storeEvents(store, { ...paging, chain: cut.chain })) {
      if (e.seq > cut.cutSeq) break;
      if (e.seq > cut.baseSeq) yield e;
    }
  }
}

/**
 * Writes the export to `out` with backpressure, without ending it (the caller owns `out`, e.g.
 * stdout). Returns how many events it wrote.
 */
export async function writeAuditExport(
  store: Pick<AuditStore, 'readEvents' | 'chainHeads'>,
  out: NodeJS.WritableStream,
  options: AuditExportOptions = {},
): Promise<{ readonly events: number }> {
  let lines = 0;
  async function* counted(): AsyncGenerator<string, void, undefined> {
    for await (const line of auditExportLines(store, options)) {
      lines += 1;
      yield line;
    }
  }
  await pipeline(Readable.from(counted()), out, { end: false });
  return { events: Math.max(0, lines - 1) };
}

/**
 * Verifies an export given as its lines (without line ends), streaming: memory does not grow with
 * the number of events. The header is checked, then every event with `verifyChain` against the
 * header's heads, byte for byte as the store verifier does. Throws `AuditExportError` (with the
 * line) when a line is not an export line at all; chain problems are in the report.
 */
export async function verifyAuditExport(
  lines: AsyncIterable<string> | Iterable<string>,
): Promise<AuditExportReport> {
  const numbered = numberedLines(lines);
  try {
    const first = await numbered.next();
    if (first.done) throw new AuditExportError(1, 'empty file: expected the effectgate-audit header line');
    const header = parseHeader(first.value.text);
    async function* events(): AsyncGenerator<EventRecord, void, undefined> {
      for (;;) {
        const next = await numbered.next();
        if (next.done) return;
        yield parseEventLine(next.value.text, next.value.line);
      }
    }
    const report = await verifyChain(events(), header.heads);
    return { ...report, exportedAt: header.exported_at };
  } finally {
    await numbered.return(undefined);
  }
}

/** `verifyAuditExport` over a file, read line by line. File system errors are thrown as they are. */
export async function verifyAuditExportFile(path: string): Promise<AuditExportReport> {
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
    const report = await verifyAuditExport(lines);
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

const HEADER_FIELDS = ['format', 'version', 'exported_at', 'chains', 'heads'] as const;
const HEAD_FIELDS_V1 = ['chain', 'lastSeq', 'lastHash'] as const;
const HEAD_FIELDS = ['chain', 'baseSeq', 'baseHash', 'lastSeq', 'lastHash'] as const;
const EVENT_FIELDS = [
  'chain',
  'seq',
  'type',
  'operationId',
  'recordedAtUs',
  'payload',
  'prevHash',
  'hash',
] as const;

function parseHeader(text: string): AuditExportHeader {
  const fail = (detail: string): never => {
    throw new AuditExportError(1, detail);
  };
  const value = parseJsonObject(text, 1, 'the effectgate-audit header');
  if (value['format'] !== AUDIT_EXPORT_FORMAT) {
    fail(`not an effectgate audit export: the header's format is ${describe(value['format'])}`);
  }
  const version = value['version'];
  if (version !== 1 && version !== AUDIT_EXPORT_VERSION) {
    fail(
      `unsupported export version ${describe(version)} (this effectgate reads versions 1 and ${AUDIT_EXPORT_VERSION})`,
    );
  }
  onlyFields(value, HEADER_FIELDS, 1, 'header');
  if (typeof value['exported_at'] !== 'string') fail('header field "exported_at" must be a string');
  if (value['chains'] !== EVENT_CHAINS) {
    fail(`the export has ${describe(value['chains'])} chains; this effectgate has ${EVENT_CHAINS}`);
  }
  const heads = value['heads'];
  if (!Array.isArray(heads)) return fail('header field "heads" must be an array');
  const parsed = heads.map((head: unknown, i): ChainHead => {
    if (!isObject(head)) return fail(`heads[${i}] must be an object`);
    onlyFields(head, version === 1 ? HEAD_FIELDS_V1 : HEAD_FIELDS, 1, `heads[${i}]`);
    const chain = head['chain'];
    const lastSeq = head['lastSeq'];
    const lastHash = head['lastHash'];
    const baseSeq = head['baseSeq'] ?? 0;
    const baseHash = head['baseHash'] ?? GENESIS_HASH;
    if (!Number.isSafeInteger(chain)) fail(`heads[${i}].chain must be an integer`);
    for (const [field, n] of [
      ['lastSeq', lastSeq],
      ['baseSeq', baseSeq],
    ] as const) {
      if (!Number.isSafeInteger(n) || (n as number) < 0) fail(`heads[${i}].${field} must be an integer >= 0`);
    }
    if (typeof lastHash !== 'string') fail(`heads[${i}].lastHash must be a string`);
    if (typeof baseHash !== 'string') fail(`heads[${i}].baseHash must be a string`);
    return {
      chain: chain as number,
      baseSeq: baseSeq as number,
      baseHash: baseHash as string,
      lastSeq: lastSeq as number,
      lastHash: lastHash as string,
    };
  });
  return {
    format: AUDIT_EXPORT_FORMAT,
    version: version as 1 | typeof AUDIT_EXPORT_VERSION,
    exported_at: value['exported_at'] as string,
    chains: EVENT_CHAINS,
    heads: parsed,
  };
}

function parseEventLine(text: string, line: number): EventRecord {
  const value = parseJsonObject(text, line, 'an event');
  onlyFields(value, EVENT_FIELDS, line, 'event');
  const fail = (detail: string): never => {
    throw new AuditExportError(line, detail);
  };
  for (const field of ['chain', 'seq'] as const) {
    if (!Number.isSafeInteger(value[field])) fail(`event field "${field}" must be an integer`);
  }
  for (const field of ['type', 'recordedAtUs', 'payload', 'prevHash', 'hash'] as const) {
    if (typeof value[field] !== 'string') fail(`event field "${field}" must be a string`);
  }
  const operationId = value['operationId'];
  if (operationId !== null && typeof operationId !== 'string') {
    fail('event field "operationId" must be a string or null');
  }
  return {
    chain: value['chain'] as number,
    seq: value['seq'] as number,
    type: value['type'] as string,
    operationId: operationId as string | null,
    recordedAtUs: value['recordedAtUs'] as string,
    payload: value['payload'] as string,
    prevHash: value['prevHash'] as string,
    hash: value['hash'] as string,
  };
}

function parseJsonObject(text: string, line: number, what: string): Record<string, unknown> {
  if (text.trim() === '') throw new AuditExportError(line, `empty line, expected ${what}`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new AuditExportError(line, `not JSON, expected ${what} (${safe((err as Error).message)})`);
  }
  if (!isObject(value)) throw new AuditExportError(line, `expected ${what} (a JSON object)`);
  return value;
}

function onlyFields(
  value: Record<string, unknown>,
  fields: readonly string[],
  line: number,
  what: string,
): void {
  for (const field of fields) {
    if (!Object.hasOwn(value, field)) throw new AuditExportError(line, `${what} field "${field}" is missing`);
  }
  for (const key of Object.keys(value)) {
    // Nothing unhashed may ride along with an event: every field is one the verifier checks.
    if (!fields.includes(key)) throw new AuditExportError(line, `unexpected ${what} field ${describe(key)}`);
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A value from the file, quoted, control characters escaped, and cut short for one-line messages. */
function describe(value: unknown): string {
  const text = value === undefined ? 'missing' : (JSON.stringify(value) ?? String(value));
  return safe(text);
}

function safe(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: replacing control characters is the point
  const clean = text.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
  return clean.length <= 80 ? clean : `${clean.slice(0, 79)}…`;
}
