import { AuditSealer, chooseAuditKey, type NoteSigner, type Store } from '../store/index.js';
import type { GateLogger } from './gate.js';

/** How a gate seals its store's trail (createGate's options). */
export interface GateSealOptions {
  /**
   * The key that signs the trail's checkpoints; `null`: the gate seals nothing. Default: the
   * signer key file `auditKeyFile`, else `EFFECTGATE_AUDIT_KEY_FILE`, else, on an embedded store
   * this gate opened, a key file beside it (`DIR.keys/audit.key`, made at first start) or a
   * per-process key for `pglite:memory`; on PostgreSQL or a store passed in open, none: the gate
   * says so at start. Every gate of one database seals with the same key.
   */
  readonly auditKey?: NoteSigner | null;
  /** A signer key file (owner-only, or group-readable like a mounted Secret): see `auditKey`. */
  readonly auditKeyFile?: string;
  /** How often the sealer looks for new events; default 250 ms. */
  readonly sealIntervalMs?: number;
}

/**
 * Starts the gate's sealer (store/audit-sealer.ts) when it has a key, and returns what stops it;
 * without one, warns that the trail will not be sealed. `storeUrl`: the store's URL when the
 * gate opened it (where an embedded store's key lives), else null.
 */
export async function startGateSealer(input: {
  readonly store: Store;
  readonly storeUrl: string | null;
  readonly options: GateSealOptions;
  readonly logger: GateLogger;
}): Promise<(() => Promise<void>) | null> {
  const { store, storeUrl, options, logger } = input;
  const signer = await chooseSigner(storeUrl, options, logger);
  if (signer === null) return null;
  const sealer = new AuditSealer({
    store,
    signer,
    ...(options.sealIntervalMs === undefined ? {} : { intervalMs: options.sealIntervalMs }),
    logger,
  });
  sealer.start();
  return async (): Promise<void> => {
    await sealer.stop();
    // What the last calls appended is sealed before the store closes: a gate stopped cleanly
    // leaves nothing unsealed behind.
    await sealer
      .seal()
      .catch((err: unknown) =>
        logger.warn(
          { err: String(err) },
          'audit sealer: the last round failed; the next gate seals the rest',
        ),
      );
  };
}

async function chooseSigner(
  storeUrl: string | null,
  options: GateSealOptions,
  logger: GateLogger,
): Promise<NoteSigner | null> {
  if (options.auditKey !== undefined) return options.auditKey;
  const fromEnv = process.env['EFFECTGATE_AUDIT_KEY_FILE'];
  const keyFile = options.auditKeyFile ?? (fromEnv === undefined || fromEnv === '' ? undefined : fromEnv);
  if (keyFile === undefined && storeUrl === null) {
    logger.warn({}, NO_KEY);
    return null;
  }
  const key = await chooseAuditKey({ keyFile, storeUrl: storeUrl ?? '', create: true });
  if (key.signer === null) logger.warn({}, NO_KEY);
  else if (key.created) logger.info({ path: key.path }, "audit key made: it signs the trail's checkpoints");
  return key.signer;
}

const NO_KEY =
  'no audit key: the trail is hash-chained but not sealed with signed checkpoints; give every gate the same key with --audit-key-file or EFFECTGATE_AUDIT_KEY_FILE (effectgate keys audit makes one)';
