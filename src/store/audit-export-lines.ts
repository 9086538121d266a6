import { EffectgateError } from '../errors.js';
import { EVENT_CHAINS, GENESIS_HASH } from './audit-chain.js';
import { MerkleFrontier } from './merkle-tree.js';
import type { ChainedEvent, ChainHead } from './types.js';

/*
 * The lines of an `audit export` (audit-export.ts writes them, audit-export-verify.ts checks
 * them), read strictly: a field missing, of the wrong type or not expected is refused with its
 * line, so nothing unchecked rides along with the events.
 */

export const AUDIT_EXPORT_FORMAT = 'effectgate-audit';
export const AUDIT_EXPORT_VERSION = 3;

/** The tree a version 3 export starts from: the frontier of its first checkpoint (MerkleFrontier JSON, parsed). */
export interface ExportTree {
  readonly size: number;
  readonly hashes: readonly string[];
}

/** The first line of an export. */
export interface AuditExportHeader {
  readonly format: typeof AUDIT_EXPORT_FORMAT;
  readonly version: 1 | 2 | typeof AUDIT_EXPORT_VERSION;
  readonly exported_at: string;
  readonly chains: number;
  /** Each chain's events in the file run from its base (exclusive) to its last (inclusive). */
  readonly heads: readonly ChainHead[];
  /** Version 3: the log's origin, as its checkpoints' notes name it. */
  readonly origin?: string;
  /** Version 3: the tree at the file's first checkpoint; null when the file holds no checkpoint. */
  readonly tree?: ExportTree | null;
  /**
   * Version 3: the file's last checkpoint (null with `tree`), which its last checkpoint line must
   * be: a file cut short after it shows. Unsigned, as the whole header: a witness settles a file
   * rewritten to end earlier.
   */
  readonly latest?: ExportLatest | null;
}

/** The size and root of an export's last checkpoint (its header's `latest`). */
export interface ExportLatest {
  readonly size: number;
  readonly root: string;
}

/** A checkpoint line of a version 3 export: the checkpoint's signed note, exactly as stored. */
export interface CheckpointLine {
  readonly checkpoint: string;
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

/** The export line of one event: its stored fields, nothing else. */
export function eventLine(e: ChainedEvent): string {
  const line: ChainedEvent = {
    chain: e.chain,
    seq: e.seq,
    type: e.type,
    operationId: e.operationId,
    recordedAtUs: e.recordedAtUs,
    payload: e.payload,
    prevHash: e.prevHash,
    hash: e.hash,
  };
  return `${JSON.stringify(line)}\n`;
}

const HEADER_FIELDS = ['format', 'version', 'exported_at', 'chains', 'heads'] as const;
const HEADER_FIELDS_V3 = [...HEADER_FIELDS, 'origin', 'tree', 'latest'] as const;
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

export function parseHeader(text: string): AuditExportHeader {
  const fail = (detail: string): never => {
    throw new AuditExportError(1, detail);
  };
  const value = parseJsonObject(text, 1, 'the effectgate-audit header');
  if (value['format'] !== AUDIT_EXPORT_FORMAT) {
    fail(`not an effectgate audit export: the header's format is ${describe(value['format'])}`);
  }
  const version = value['version'];
  if (version !== 1 && version !== 2 && version !== AUDIT_EXPORT_VERSION) {
    fail(
      `unsupported export version ${describe(version)} (this effectgate reads versions 1 to ${AUDIT_EXPORT_VERSION})`,
    );
  }
  onlyFields(value, version === AUDIT_EXPORT_VERSION ? HEADER_FIELDS_V3 : HEADER_FIELDS, 1, 'header');
  if (typeof value['exported_at'] !== 'string') fail('header field "exported_at" must be a string');
  if (value['chains'] !== EVENT_CHAINS) {
    fail(`the export has ${describe(value['chains'])} chains; this effectgate has ${EVENT_CHAINS}`);
  }
  const heads = value['heads'];
  if (!Array.isArray(heads)) return fail('header field "heads" must be an array');
  const parsed = heads.map((head: unknown, i) => parseHead(head, i, version === 1));
  const v3 =
    version === AUDIT_EXPORT_VERSION
      ? {
          origin: parseOrigin(value['origin']),
          tree: parseTree(value['tree']),
          latest: parseLatest(value['latest'], value['tree'] === null),
        }
      : {};
  return {
    format: AUDIT_EXPORT_FORMAT,
    version: version as AuditExportHeader['version'],
    exported_at: value['exported_at'] as string,
    chains: EVENT_CHAINS,
    heads: parsed,
    ...v3,
  };
}

function parseHead(head: unknown, i: number, v1: boolean): ChainHead {
  const fail = (detail: string): never => {
    throw new AuditExportError(1, detail);
  };
  if (!isObject(head)) return fail(`heads[${i}] must be an object`);
  onlyFields(head, v1 ? HEAD_FIELDS_V1 : HEAD_FIELDS, 1, `heads[${i}]`);
  const { chain, lastSeq, lastHash } = head;
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
}

function parseOrigin(origin: unknown): string {
  if (typeof origin !== 'string' || origin === '' || origin.includes('\n'))
    throw new AuditExportError(1, 'header field "origin" must be one line of text');
  return origin;
}

function parseTree(tree: unknown): ExportTree | null {
  if (tree === null) return null;
  try {
    // The frontier's own reader: its size, one hash per set bit of it, each 64 hex digits.
    const frontier = MerkleFrontier.fromJSON(JSON.stringify(tree));
    return Object.freeze(JSON.parse(frontier.toJSON()) as ExportTree);
  } catch (err) {
    throw new AuditExportError(
      1,
      `header field "tree" is not a Merkle frontier (${safe((err as Error).message)})`,
    );
  }
}

function parseLatest(latest: unknown, treeless: boolean): ExportLatest | null {
  const fail = (detail: string): never => {
    throw new AuditExportError(1, detail);
  };
  if (latest === null) return treeless ? null : fail('header field "latest" must name the last checkpoint');
  if (treeless) fail('header field "latest" must be null when "tree" is');
  if (!isObject(latest)) return fail('header field "latest" must be an object or null');
  onlyFields(latest, ['size', 'root'], 1, 'latest');
  if (!Number.isSafeInteger(latest['size']) || (latest['size'] as number) < 0)
    fail('latest.size must be an integer >= 0');
  if (typeof latest['root'] !== 'string' || !/^[0-9a-f]{64}$/.test(latest['root']))
    fail('latest.root must be 64 lowercase hex digits');
  return { size: latest['size'] as number, root: latest['root'] as string };
}

/** An event line, or (version 3) a checkpoint line. */
export function parseBodyLine(text: string, line: number, v3: boolean): ChainedEvent | CheckpointLine {
  const value = parseJsonObject(text, line, v3 ? 'an event or a checkpoint' : 'an event');
  if (v3 && Object.hasOwn(value, 'checkpoint')) {
    onlyFields(value, ['checkpoint'], line, 'checkpoint');
    if (typeof value['checkpoint'] !== 'string')
      throw new AuditExportError(line, 'checkpoint field "checkpoint" must be a string (its signed note)');
    return { checkpoint: value['checkpoint'] };
  }
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
