import { checkPositiveInt, checkScope } from '../config/index.js';
import { loadPolicies, type PolicySet } from '../policy/index.js';
import { openStore, type Store, uuidv7 } from '../store/index.js';
import { Gate, type GateLogger } from './gate.js';
import { type GateMetrics, noGateMetrics } from './gate-metrics.js';

export interface CreateGateOptions {
  /** A loaded policy set, or a policies folder / file to load. */
  readonly policies: PolicySet | string;
  /** An open store, or a store URL (`postgres://…`, `pglite:DIR`, `pglite:memory`). */
  readonly store: Store | string;
  readonly scope: { readonly tenant: string; readonly area: string; readonly agent: string };
  /** Run id for requests without `Effectgate-Run`; default one UUIDv7 per gate. */
  readonly runId?: string;
  /** Largest governed request body, default 1 MiB. */
  readonly maxBodyBytes?: number;
  /**
   * Key of the HMAC authority reference (default `EFFECTGATE_AUTHORITY_KEY`, else the store's own
   * random key, so a changed credential is recognised across restarts; `null` records only which
   * header carried a credential).
   */
  readonly authorityKey?: string | null;
  readonly logger?: GateLogger;
  /**
   * Where decisions, dispatch times, reservation waits and reconciliations are counted (default:
   * nowhere). `effectgate proxy --admin` passes the admin server's Prometheus metrics.
   */
  readonly metrics?: GateMetrics;
}

const silent: GateLogger = { info() {}, warn() {}, error() {} };

/**
 * Creates the engine every front door shares. Options are validated once, here.
 *
 * @example
 * import { createGate } from 'effectgate';
 * import { gateInterceptor } from 'effectgate/undici';
 * import { Agent, setGlobalDispatcher } from 'undici';
 *
 * const gate = await createGate({
 *   policies: './policies',
 *   store: 'pglite:./.effectgate',
 *   scope: { tenant: 'acme', area: 'support', agent: 'triage-bot' },
 * });
 * // In process: every fetch() and undici request of this process now goes through the gate.
 * setGlobalDispatcher(new Agent().compose(gateInterceptor(gate, { run: 'nightly-triage-42' })));
 * // The forward proxy (`effectgate proxy`) is the other front door; both adapters call
 * // gate.route(head) and gate.handle(request, send) on the same engine.
 */
export async function createGate(options: CreateGateOptions): Promise<Gate> {
  const scope = checkScope(options.scope);
  const maxBodyBytes =
    options.maxBodyBytes === undefined ? 1024 * 1024 : checkPositiveInt('maxBodyBytes', options.maxBodyBytes);
  const policies =
    typeof options.policies === 'string' ? await loadPolicies(options.policies) : options.policies;
  const store = typeof options.store === 'string' ? await openStore({ url: options.store }) : options.store;
  const authorityKey =
    options.authorityKey !== undefined
      ? options.authorityKey
      : (process.env['EFFECTGATE_AUTHORITY_KEY'] ?? (await store.authorityKey()));
  return new Gate(
    Object.freeze({
      policies,
      store,
      scope,
      runId: options.runId ?? uuidv7(),
      instanceId: uuidv7(),
      maxBodyBytes,
      authorityKey,
      logger: options.logger ?? silent,
      metrics: options.metrics ?? noGateMetrics,
    }),
  );
}
