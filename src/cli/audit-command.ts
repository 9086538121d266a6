import {
  AuditExportError,
  type AuditReport,
  type ExportSealReport,
  type NoteVerifier,
  openInspectionStore,
  readVerifierKey,
  resolveStoreUrl,
  type SealReport,
  verifyAuditExportFile,
  verifyStoreChain,
} from '../store/index.js';
import { exportLog } from './audit-export-command.js';
import { isoInstant, prune } from './audit-prune-command.js';
import {
  checkSeal,
  printCheckpoint,
  printSeal,
  readWitnesses,
  sealVerifier,
  type WitnessResult,
  witnessLines,
} from './audit-seal-command.js';
import { printable } from './cli-text.js';
import { isFsError } from './fs-error.js';
import { type FlagTable, parseFlags } from './parse-flags.js';

export const USAGE = `usage: effectgate audit verify [--store URL] [--audit-key-file FILE] [--witness FILE]… [--json]
       effectgate audit verify --file FILE [--audit-key-file FILE] [--witness FILE]… [--json]
       effectgate audit checkpoint [--store URL]
       effectgate audit export [--store URL] [--out FILE [--force]]
       effectgate audit prune --before TIME --archive FILE [--store URL] [--json]
defaults: --store DATABASE_URL else pglite:./.effectgate; audit export writes to stdout without --out;
  --audit-key-file: the key beside an embedded store (not for --file), else none (signatures unchecked)`;

export const AUDIT_OPTIONS = {
  store: { type: 'string' },
  json: { type: 'boolean', default: false },
  file: { type: 'string' },
  out: { type: 'string' },
  force: { type: 'boolean', default: false },
  before: { type: 'string' },
  archive: { type: 'string' },
  'audit-key-file': { type: 'string' },
  witness: { type: 'string', multiple: true },
} as const satisfies FlagTable;

/**
 * `effectgate audit verify [--store URL] [--audit-key-file FILE] [--witness FILE]… [--json]`: exit 0
 * when every chain is intact and the sealed log verifies (every checkpoint's signature and root,
 * every kept checkpoint held by the store), 1 naming the first bad event of each broken chain and
 * each bad checkpoint; the events not sealed yet are reported either way.
 * `effectgate audit checkpoint [--store URL]`: the latest checkpoint's signed note, for a witness.
 * `effectgate audit verify --file FILE [--audit-key-file FILE] [--witness FILE]… [--json]`: the
 * same over an export, offline (no store): its chains, and its checkpoints' roots, signatures and
 * witnesses; a line that is not an export line is exit 1 as `FILE:LINE: message`.
 * `effectgate audit export [--store URL] [--out FILE [--force]]`: the event log as JSON Lines
 * (see store/audit-export.ts) on stdout, or in FILE (mode 0600, never overwriting one unless
 * `--force`).
 * `effectgate audit prune --before TIME --archive FILE [--store URL] [--json]`: retention (see
 * store/audit-retention.ts): the events sealed by the last checkpoint sealed before TIME (ISO
 * 8601) go to FILE (a new file, mode 0600, fsynced and verified back first) and are removed from
 * the store, which verifies on from that checkpoint. Exit 0, or 1 with nothing removed when the
 * archive cannot be written or does not verify.
 */
export async function runAudit(argv: readonly string[]): Promise<number> {
  const { positionals, values } = parseFlags(
    { args: [...argv], allowPositionals: true, options: AUDIT_OPTIONS },
    USAGE,
  );
  const [sub, ...extra] = positionals;
  const usage = (problem: string): number => {
    process.stderr.write(`effectgate: ${problem}\n${USAGE}\n`);
    return 2;
  };
  if (extra.length > 0) return usage(`audit ${sub} takes no arguments, got ${JSON.stringify(extra[0])}`);
  const witnesses = values.witness ?? [];
  const auditKeyFile = values['audit-key-file'];
  if (sub !== 'verify' && (auditKeyFile !== undefined || witnesses.length > 0))
    return usage('--audit-key-file and --witness are for audit verify');
  if (sub === 'verify') {
    if (values.out !== undefined || values.force) return usage('--out and --force are for audit export');
    if (auditKeyFile === '' || witnesses.includes(''))
      return usage('--audit-key-file and --witness need a file');
    if (values.file === undefined) return verifyStore(values.store, values.json, { auditKeyFile, witnesses });
    if (values.store !== undefined) return usage('--file and --store are exclusive');
    if (values.file === '') return usage('--file needs a file name');
    return verifyFile(values.file, values.json, { auditKeyFile, witnesses });
  }
  if (sub !== 'prune' && (values.before !== undefined || values.archive !== undefined))
    return usage('--before and --archive are for audit prune');
  if (sub === 'prune') {
    if (values.file !== undefined || values.out !== undefined || values.force)
      return usage('audit prune takes --before TIME and --archive FILE');
    if (values.before === undefined || values.archive === undefined || values.archive === '')
      return usage('audit prune needs --before TIME and --archive FILE');
    const before = isoInstant(values.before);
    if (before === null)
      return usage(
        `--before ${JSON.stringify(values.before)} is not an ISO 8601 time with a zone (e.g. 2026-11-01T00:00:00Z)`,
      );
    return prune(values.store, before, values.archive, values.json);
  }
  if (sub === 'checkpoint') {
    if (values.file !== undefined || values.out !== undefined || values.force || values.json)
      return usage('audit checkpoint takes only --store URL');
    return printCheckpoint(values.store);
  }
  if (sub === 'export') {
    if (values.file !== undefined) return usage('audit export writes to --out FILE (--file is for verify)');
    if (values.force && values.out === undefined) return usage('--force needs --out FILE');
    if (values.out === '') return usage('--out needs a file name');
    return exportLog(values.store, values.out, values.force);
  }
  process.stderr.write(`${USAGE}\n`);
  return 2;
}

async function verifyStore(
  storeFlag: string | undefined,
  json: boolean,
  seal: { readonly auditKeyFile: string | undefined; readonly witnesses: readonly string[] },
): Promise<number> {
  const url = resolveStoreUrl(storeFlag);
  // Before the store is opened: a bad key file is refused at once.
  const verifier = await sealVerifier(url, seal.auditKeyFile);
  const store = await openInspectionStore(url);
  try {
    const report = await verifyStoreChain(store);
    const check = await checkSeal(store, verifier, seal.witnesses);
    // `ok`: the whole answer (the exit code's), chains, seal and witnesses together.
    const ok = report.ok && check.ok;
    if (json)
      process.stdout.write(
        `${JSON.stringify({ ...report, ok, sealed: check.sealed, witnessed: check.witnessed })}\n`,
      );
    else {
      printReport(report, '');
      printSeal(check, verifier);
    }
    return ok ? 0 : 1;
  } finally {
    await store.close();
  }
}

async function verifyFile(
  file: string,
  json: boolean,
  seal: { readonly auditKeyFile: string | undefined; readonly witnesses: readonly string[] },
): Promise<number> {
  // Before the file is read: a bad key file is refused at once.
  const verifier = seal.auditKeyFile === undefined ? null : await readVerifierKey(seal.auditKeyFile);
  const notes = await readWitnesses(seal.witnesses);
  try {
    const kept = notes.flatMap((n) => ('note' in n ? [n.note] : []));
    const report = await verifyAuditExportFile(file, { verifier, witnesses: kept });
    // The witnesses in the order given: the unreadable ones where they were.
    const checked = [...(report.seal?.witnessed ?? [])];
    const witnessed = notes.map((n) => ('note' in n ? { file: n.file, ...checked.shift()! } : n));
    const ok = report.ok && witnessed.every((w) => w.ok);
    if (json) process.stdout.write(`${JSON.stringify({ file, ...report, ok, witnessed })}\n`);
    else {
      printReport(report, ` in ${printable(file)} (exported at ${printable(report.exportedAt)})`);
      if (report.seal !== null) printExportSeal(report.seal, witnessed, verifier);
      // A file of chains only: no seal to print, but a witness that could not be read says why.
      else if (witnessed.length > 0) process.stdout.write(`${witnessLines(witnessed).join('\n')}\n`);
    }
    return ok ? 0 : 1;
  } catch (err) {
    if (err instanceof AuditExportError) {
      if (json) {
        const malformed = { line: err.line, message: err.detail };
        process.stdout.write(`${JSON.stringify({ file, ok: false, malformed })}\n`);
      }
      process.stderr.write(`${printable(file)}:${err.line}: ${err.detail}\n`);
      return 1;
    }
    if (isFsError(err)) {
      process.stderr.write(`effectgate: cannot read ${printable(file)}: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}

/** An export's seal, printed as a store's is, with the events its checkpoints do not cover. */
function printExportSeal(
  seal: ExportSealReport,
  witnessed: readonly WitnessResult[],
  verifier: NoteVerifier | null,
): void {
  const sealed: SealReport = {
    ok: seal.problems.length === 0,
    checkpoints: seal.checkpoints,
    rehashed: seal.sealed,
    latest: seal.latest === null ? null : { ...seal.latest, sealedAt: seal.latest.sealedAt ?? 'unknown' },
    signatures: seal.signatures,
    problems: seal.problems,
    unsealed: { count: seal.unsealed, oldestAt: null },
  };
  printSeal({ ok: sealed.ok && witnessed.every((w) => w.ok), sealed, witnessed }, verifier);
  // Where the file starts: size 0 is the whole history, a later one where the last prune cut it.
  if (seal.first !== null)
    process.stdout.write(`the file starts at checkpoint ${seal.first.size} (root ${seal.first.root})\n`);
  if (seal.before > 0)
    process.stdout.write(
      `${seal.before} events sealed before the file's first checkpoint: checked by their chains only\n`,
    );
}

function printReport(report: AuditReport, where: string): void {
  if (report.ok) {
    process.stdout.write(
      `audit chain intact: ${report.checked} event(s) on ${report.chains} chain(s)${where}\n`,
    );
    return;
  }
  for (const bad of report.broken)
    process.stdout.write(`audit chain BROKEN at chain ${bad.chain} event seq ${bad.seq}: ${bad.reason}\n`);
}
