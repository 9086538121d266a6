import { readFile } from 'node:fs/promises';
import {
  checkWitnessed,
  chooseAuditKey,
  embeddedStoreDir,
  type NoteVerifier,
  openInspectionStore,
  parseVerifierKey,
  readVerifierKey,
  resolveStoreUrl,
  type SealReport,
  type Store,
  verifySealedLog,
  type WitnessCheck,
} from '../store/index.js';
import { printable } from './cli-text.js';

/** One `--witness FILE` checked against the store. */
export interface WitnessResult extends WitnessCheck {
  readonly file: string;
}

/** What `audit verify` found about the sealed log, beside the chains. */
export interface SealCheck {
  readonly ok: boolean;
  readonly sealed: SealReport;
  readonly witnessed: readonly WitnessResult[];
}

/**
 * The key `audit verify` checks signatures against: `--audit-key-file` (a verifier key, or a
 * signer key whose verifier is used), else the key kept beside an embedded store on disk, else
 * none (roots are still recomputed; signatures are reported unchecked). Never one made here:
 * `pglite:memory`'s key lives only in the process that made it.
 */
export async function sealVerifier(
  storeUrl: string,
  auditKeyFile: string | undefined,
): Promise<NoteVerifier | null> {
  if (auditKeyFile !== undefined) return readVerifierKey(auditKeyFile);
  if (embeddedStoreDir(storeUrl) === null) return null;
  const key = await chooseAuditKey({ storeUrl, create: false });
  return key.signer === null ? null : parseVerifierKey(key.signer.verifierKey);
}

/** Verifies the sealed log and every kept checkpoint (`--witness`) against the store. */
export async function checkSeal(
  store: Store,
  verifier: NoteVerifier | null,
  witnesses: readonly string[],
): Promise<SealCheck> {
  const sealed = await verifySealedLog(store, verifier);
  const witnessed: WitnessResult[] = [];
  for (const w of await readWitnesses(witnesses)) {
    witnessed.push('note' in w ? { file: w.file, ...(await checkWitnessed(store, w.note, verifier)) } : w);
  }
  return { ok: sealed.ok && witnessed.every((w) => w.ok), sealed, witnessed };
}

/** The notes of `--witness` files; one that cannot be read is a failed witness, saying why. */
export async function readWitnesses(
  files: readonly string[],
): Promise<({ readonly file: string; readonly note: string } | WitnessResult)[]> {
  return Promise.all(
    files.map(async (file) => {
      try {
        return { file, note: await readFile(file, 'utf8') };
      } catch (err) {
        return { file, ok: false, size: null, reason: `cannot read it: ${(err as Error).message}` };
      }
    }),
  );
}

/** The seal part of `audit verify`'s text, after the chains' line. */
export function printSeal(check: SealCheck, verifier: NoteVerifier | null, now = Date.now()): void {
  const { sealed } = check;
  const lines: string[] = [];
  lines.push(
    sealed.latest === null
      ? sealed.checkpoints === 0
        ? 'audit log sealed: no checkpoint yet (a gate seals the trail only with an audit key)'
        : `audit log sealed: ${sealed.checkpoints} checkpoint(s), none readable`
      : `audit log sealed: ${sealed.checkpoints} checkpoint(s) checked, ${sealed.rehashed} event(s) rehashed; latest size ${sealed.latest.size}, sealed at ${printable(sealed.latest.sealedAt)}`,
  );
  lines.push(
    verifier === null
      ? 'signatures unchecked (no audit key: give --audit-key-file)'
      : `signatures checked against ${printable(verifier.name)}`,
  );
  for (const p of sealed.problems) lines.push(`checkpoint ${p.size}: ${printable(p.reason)}`);
  const { count, oldestAt } = sealed.unsealed;
  lines.push(
    oldestAt === null
      ? `${count} events not sealed yet`
      : `${count} events not sealed yet, oldest ${Math.max(0, Math.round((now - Date.parse(oldestAt)) / 1000))}s`,
  );
  lines.push(...witnessLines(check.witnessed));
  process.stdout.write(`${lines.join('\n')}\n`);
}

/** One line per `--witness` file: held, or why not. */
export function witnessLines(witnessed: readonly WitnessResult[]): string[] {
  return witnessed.map((w) =>
    w.ok
      ? `witness ${printable(w.file)}: ok (checkpoint of size ${w.size} held)`
      : `witness ${printable(w.file)}: FAILED: ${printable(w.reason ?? 'unknown')}`,
  );
}

/**
 * `effectgate audit checkpoint [--store URL]`: the latest checkpoint's signed note, exactly, for a
 * witness to keep (`> kept.note`) and give back later to `audit verify --witness`. Exit 1 when the
 * log has none yet.
 */
export async function printCheckpoint(storeFlag: string | undefined): Promise<number> {
  const store = await openInspectionStore(resolveStoreUrl(storeFlag));
  let note: string | null;
  try {
    note = (await store.latestCheckpoint())?.note ?? null;
  } finally {
    await store.close();
  }
  if (note === null) {
    process.stderr.write(
      'effectgate: the audit log has no checkpoint yet: no gate has sealed this store (a gate seals only with an audit key: --audit-key-file, or the key beside an embedded store), or it recorded nothing yet\n',
    );
    return 1;
  }
  process.stdout.write(note);
  return 0;
}
