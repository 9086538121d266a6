import { checkCount, checkInstanceId, checkPositiveInt, checkScope } from '../config/index.js';
import { EffectgateError } from '../errors.js';
import { loadPolicies, type PolicySet } from '../policy/index.js';
import {
  DEFAULT_STORE_URL,
  EventProjector,
  embeddedStoreDir,
  GATE_MODES,
  type GateMode,
  openStore,
  type Store,
  serveStoreSocket,
} from '../store/index.js';
import { resolveAuthorityKey } from './authority-key.js';
import { Gate, type GateLogger } from './gate.js';
import { GateLifecycle } from './gate-lifecycle.js';
import { type GateMetrics, noGateMetrics } from './gate-metrics.js';
import { type GateSealOptions, startGateSealer } from './gate-sealer.js';
import { type GateTracer, noGateTracer } from './gate-tracing.js';
import { defaultInstanceId } from './instance-id.js';
import { BODY_LIMITS, type BodyLimits } from './json-scan.js';
import { OUTBOX_DEFAULTS, OutcomeOutbox } from './outcome-outbox.js';
import { ANALYSIS_DEFAULTS } from './proposal-pool.js';
import { RUN_DEFAULTS, RunIdentity } from './run-identity.js';
import { unknownRules } from './unknown-rule.js';

export interface CreateGateOptions extends GateSealOptions {
  /** A loaded policy set, or a policies folder / file to load. */
  readonly policies: PolicySet | string;
  /**
   * An open store, or a store URL (`postgres://…`, `pglite:DIR`, `pglite:memory`). Default: the
   * embedded store in `./.effectgate`, like the CLI. A store the gate opened is closed by `close()`.
   */
  readonly store?: Store | string;
  readonly scope: { readonly tenant: string; readonly area: string; readonly agent: string };
  /**
   * The run of every request without `Effectgate-Run`. Default: derived per scope and client
   * address, a new one after `runIdleMs` without a governed request (run-identity.ts), so one
   * client's loop never halts another's calls.
   */
  readonly runId?: string;
  /** A derived run ends after this long without a governed request from its client; default 15 min. */
  readonly runIdleMs?: number;
  /**
   * This gate's identity on the store, stable across restarts so a restarted gate recovers its own
   * previous life's in-flight attempts at once. Default: host name + scope (`defaultInstanceId`).
   * Two gates running at the same time must not share one.
   */
  readonly instanceId?: string;
  /** Largest governed request body, default 1 MiB. */
  readonly maxBodyBytes?: number;
  /** Deepest nesting and most nodes of a governed body (defaults: `BODY_LIMITS`, 64 and 100,000). */
  readonly bodyLimits?: Partial<BodyLimits>;
  /**
   * Key of the HMAC authority reference, so a changed credential is recognised across attempts and
   * restarts; `null` records only which header carried a credential. Default
   * `EFFECTGATE_AUTHORITY_KEY`, else on an embedded store a key file beside it
   * (`DIR.keys/authority.key`, made at first start), on `pglite:memory` an in-memory key, and on
   * PostgreSQL none: the gate refuses to start (`EG_ERR_CONFIG_INVALID`), since every gate of one
   * database needs the same key and the database must not hold it (authority-key.ts).
   */
  readonly authorityKey?: string | null;
  readonly logger?: GateLogger;
  /**
   * Where decisions, dispatch times, reservation waits and reconciliations are counted (default:
   * nowhere). `effectgate proxy --admin` passes the admin server's Prometheus metrics.
   */
  readonly metrics?: GateMetrics;
  /**
   * Where a span per governed decision and attempt goes (default: nowhere, at no cost).
   * `tracerFromEnv()` makes one from the standard `OTEL_*` variables, as `effectgate proxy` does.
   * The gate owns it: `close()` exports what is buffered and stops it.
   */
  readonly tracer?: GateTracer;
  /** Heartbeat period on the store, default 5 s. */
  readonly heartbeatMs?: number;
  /** A replica silent for this long is dead and its in-flight attempts are recovered; default 30 s. */
  readonly staleAfterMs?: number;
  /** How long `close()` waits for in-flight calls and unwritten outcomes; default 10 s. */
  readonly drainTimeoutMs?: number;
  /** Outcomes kept for retry while the store is unreachable; default 10,000. */
  readonly maxPendingOutcomes?: number;
  /**
   * True when no other gate can be using this store, so every attempt without an outcome found at
   * start is orphaned. Default: true for an embedded store this call opened (its directory lock
   * proves it), false otherwise.
   */
  readonly exclusiveStore?: boolean;
  /**
   * Which host names the policies govern are resolved, so a request addressed by one of their IPs
   * is governed as that name: `all` (default), `loopback` (only `localhost`, no DNS) or `off`.
   * Default from `EFFECTGATE_RESOLVE_GOVERNED_HOSTS`, else `all`.
   */
  readonly resolveGovernedHosts?: 'all' | 'loopback' | 'off';
  /**
   * Worker threads that analyse governed bodies of `offloadBodyBytes` or more (parse, check, key),
   * so that a large or dense body never holds the event loop other requests share. Default 1; 0
   * analyses every body on the event loop.
   */
  readonly analysisThreads?: number;
  /** Smallest body sent to an analysis worker; default 16 KiB. */
  readonly offloadBodyBytes?: number;
  /**
   * On an embedded store this call opens (`pglite:DIR`), serve the store socket in DIR so the CLI's
   * inspection and approval commands reach it while the gate runs (default true).
   */
  readonly storeSocket?: boolean;
  /** Close `store` on `close()` even though it was passed in open (the CLI hands over its store). */
  readonly ownStore?: boolean;
  /**
   * `shadow`: every tool's verdicts are computed and recorded as `would_<verdict>` and nothing is
   * refused or answered by the gate: each request goes out as the agent wrote it (no Idempotency-Key
   * injected). Default `enforce`, where a tool's own `mode: shadow` still puts that tool alone in
   * shadow. Start here to see what the gate would prevent before it does.
   */
  readonly mode?: GateMode;
}

const silent: GateLogger = { info() {}, warn() {}, error() {} };

/**
 * Creates and starts the engine every front door shares. Options are validated once, here. The
 * gate is registered on its store and has recovered what earlier lives left in flight before this
 * resolves; `await gate.close()` drains it.
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
 * // …
 * await gate.close(); // waits for in-flight calls and their outcomes, then closes the store
 */
export async function createGate(options: CreateGateOptions): Promise<Gate> {
  const scope = checkScope(options.scope);
  const maxBodyBytes =
    options.maxBodyBytes === undefined ? 1024 * 1024 : checkPositiveInt('maxBodyBytes', options.maxBodyBytes);
  const bodyLimits: BodyLimits = Object.freeze({
    maxDepth: positive('bodyLimits.maxDepth', options.bodyLimits?.maxDepth, BODY_LIMITS.maxDepth),
    maxNodes: positive('bodyLimits.maxNodes', options.bodyLimits?.maxNodes, BODY_LIMITS.maxNodes),
  });
  const analysisThreads =
    options.analysisThreads === undefined
      ? ANALYSIS_DEFAULTS.threads
      : checkCount('analysisThreads', options.analysisThreads);
  const offloadBodyBytes = positive(
    'offloadBodyBytes',
    options.offloadBodyBytes,
    ANALYSIS_DEFAULTS.offloadBodyBytes,
  );
  const runIdleMs = positive('runIdleMs', options.runIdleMs, RUN_DEFAULTS.idleMs);
  const heartbeatMs = positive('heartbeatMs', options.heartbeatMs, 5_000);
  const staleAfterMs = positive('staleAfterMs', options.staleAfterMs, 30_000);
  const drainTimeoutMs = positive('drainTimeoutMs', options.drainTimeoutMs, 10_000);
  const maxEntries = positive('maxPendingOutcomes', options.maxPendingOutcomes, OUTBOX_DEFAULTS.maxEntries);
  const instanceId =
    options.instanceId === undefined
      ? defaultInstanceId({ scope: `${scope.tenant}/${scope.area}/${scope.agent}` })
      : checkInstanceId(options.instanceId);
  const resolveGovernedHosts = checkResolveMode(
    options.resolveGovernedHosts ?? process.env['EFFECTGATE_RESOLVE_GOVERNED_HOSTS'] ?? 'all',
  );
  const mode = checkMode(options.mode ?? 'enforce');
  const policies =
    typeof options.policies === 'string' ? await loadPolicies(options.policies) : options.policies;
  const opened = typeof options.store !== 'object';
  const storeUrl = typeof options.store === 'string' ? options.store : DEFAULT_STORE_URL;
  const store = typeof options.store === 'object' ? options.store : await openStore({ url: storeUrl });
  const logger = options.logger ?? silent;
  try {
    const fromEnv = process.env['EFFECTGATE_AUTHORITY_KEY'];
    const authorityKey = await resolveAuthorityKey({
      store,
      configured:
        options.authorityKey !== undefined
          ? options.authorityKey
          : fromEnv !== undefined && fromEnv !== ''
            ? fromEnv
            : undefined,
      logger,
    });
    const metrics = options.metrics ?? noGateMetrics;
    const tracer = options.tracer ?? noGateTracer;
    const outbox = new OutcomeOutbox(store, logger, { ...OUTBOX_DEFAULTS, maxEntries }, metrics);
    const lifecycle = new GateLifecycle({
      store,
      instanceId,
      logger,
      heartbeatMs,
      staleAfterMs,
      exclusive:
        options.exclusiveStore ?? (opened && store.kind === 'pglite' && storeUrl !== 'pglite:memory'),
      rules: unknownRules(policies.tools),
      drainTimeoutMs,
      closeStore: opened || options.ownStore === true,
      outbox,
    });
    const gate = new Gate(
      Object.freeze({
        policies,
        store,
        scope,
        mode,
        runs: new RunIdentity({
          fixed: options.runId ?? null,
          idleMs: runIdleMs,
          // Who a derived run is, for the operator reading its id in a trail or a 429.
          onNewRun: (run, runScope, client) =>
            logger.info({ run, scope: runScope, client, idle_ms: runIdleMs }, 'new derived run'),
        }),
        instanceId,
        maxBodyBytes,
        bodyLimits,
        analysisThreads,
        offloadBodyBytes,
        authorityKey,
        logger,
        metrics,
        tracer,
        resolveGovernedHosts,
        outbox,
        lifecycle,
      }),
    );
    // After the drain: the spans of the calls it waited for are ended, and exported now.
    lifecycle.onClose(() => tracer.close());
    await lifecycle.start();
    const stopSealer = await startGateSealer({
      store,
      storeUrl: opened ? storeUrl : null,
      options,
      logger,
    }).catch(async (err: unknown) => {
      await gate.close().catch(() => undefined);
      throw err;
    });
    // The decisions are projected from the events off the hot path (store/event-projector.ts).
    const projector = new EventProjector({ store, logger });
    projector.start();
    lifecycle.onClose(async () => {
      await projector.stop();
      // What the last calls decided is projected before the store closes (readers would anyway).
      await projector.project().catch(() => undefined);
    });
    // Before the store socket's hook: hooks run in order, after the drain, before the store closes.
    if (stopSealer !== null) lifecycle.onClose(stopSealer);
    // An embedded store this call opened is locked to this process: serve the same socket the
    // proxy serves, so `effectgate operations`, `approvals`, `runs`, `trail` and `audit verify`
    // work beside an in-process agent. A passed-in store is the caller's to serve.
    const socketDir = opened ? embeddedStoreDir(storeUrl) : null;
    if (socketDir !== null && options.storeSocket !== false) {
      const socket = await serveStoreSocket(store, socketDir, { instanceId }).catch(async (err: unknown) => {
        // A store directory no socket address can name (socket-path.ts): refuse, as the proxy does.
        if (err instanceof EffectgateError && err.code === 'EG_ERR_CONFIG_INVALID') {
          await gate.close().catch(() => undefined);
          throw err;
        }
        logger.warn(
          { err: String(err) },
          'no store socket: commands cannot inspect this store while it runs',
        );
        return null;
      });
      if (socket !== null) lifecycle.onClose(() => socket.close());
    }
    return gate;
  } catch (err) {
    if (opened || options.ownStore === true) await store.close().catch(() => undefined);
    throw err;
  }
}

function positive(name: string, value: number | undefined, fallback: number): number {
  return value === undefined ? fallback : checkPositiveInt(name, value);
}

function checkMode(value: unknown): GateMode {
  if ((GATE_MODES as readonly unknown[]).includes(value)) return value as GateMode;
  throw new EffectgateError(
    'EG_ERR_CONFIG_INVALID',
    `mode must be ${GATE_MODES.join(' or ')}; got ${JSON.stringify(value)}`,
  );
}

function checkResolveMode(value: string): 'all' | 'loopback' | 'off' {
  if (value === 'all' || value === 'loopback' || value === 'off') return value;
  throw new EffectgateError(
    'EG_ERR_CONFIG_INVALID',
    `EFFECTGATE_RESOLVE_GOVERNED_HOSTS (resolveGovernedHosts) must be all, loopback or off; got ${JSON.stringify(value)}`,
  );
}
