import type { AddressInfo } from 'node:net';
import {
  type AdminServer,
  createAdminServer,
  createPrometheusMetrics,
  type PrometheusMetrics,
} from '../admin/index.js';
import type { AgentRegistry, ScopeConfig } from '../config/index.js';
import { type CloseReport, createGate, type Gate, tracerFromEnv } from '../engine/index.js';
import { EffectgateError } from '../errors.js';
import type { PolicySet } from '../policy/index.js';
import {
  type CertificateAuthority,
  createProxyServer,
  type ProxyLimits,
  type ProxyServer,
  type ProxyServerOptions,
} from '../proxy/index.js';
import {
  type AuditKey,
  chooseAuditKey,
  embeddedStoreDir,
  type GateMode,
  openStore,
  type Store,
  type StoreSocketServer,
  serveStoreSocket,
} from '../store/index.js';
import type { EffectgateLogger } from './logger.js';

interface Listen {
  readonly host: string;
  readonly port: number;
}

/** Everything `effectgate proxy` was told, checked and loaded; `effectgate demo` makes its own. */
export interface ProxySetup {
  readonly policies: PolicySet;
  readonly storeUrl: string;
  readonly migrate: boolean;
  readonly scope: ScopeConfig;
  readonly instanceId: string;
  readonly listen: Listen;
  /** The admin listener (API, metrics, timeline pages), or `null` for none. */
  readonly admin: Listen | null;
  readonly adminToken: string | null;
  readonly allowConnectPorts: readonly number[];
  /** `--resolve`: where a `host:port` is dialled instead (`ProxyServerOptions.resolve`). */
  readonly resolve?: ProxyServerOptions['resolve'];
  /** Only the limits given; the rest keep DEFAULT_PROXY_LIMITS (src/proxy/proxy-limits.ts). */
  readonly limits: Partial<ProxyLimits>;
  readonly heartbeatMs: number;
  /** A derived run ends after this long idle (`--run-idle`); absent: createGate's default. */
  readonly runIdleMs?: number;
  readonly staleAfterMs: number;
  readonly drainTimeoutMs: number;
  readonly logger: EffectgateLogger;
  readonly agents?: AgentRegistry;
  readonly ca?: CertificateAuthority;
  readonly upstreamCa?: string;
  readonly authorityKey?: string;
  /**
   * `--audit-key-file`: the signer key file that seals the trail. Absent: an embedded store's key
   * beside it (made at first start), none on PostgreSQL.
   */
  readonly auditKeyFile?: string;
  readonly runId?: string;
  readonly maxBodyBytes?: number;
  readonly analysisThreads?: number;
  /** `shadow`: every tool's verdicts recorded as would_*, nothing refused (`--mode`). */
  readonly mode?: GateMode;
}

/** A started proxy: listening, its gate registered and recovered, its store open. */
export interface RunningProxy {
  readonly gate: Gate;
  /** The gate's store, for in-process reads and decisions; the gate closes it on `stop()`. */
  readonly store: Store;
  readonly addr: AddressInfo;
  readonly adminAddr: AddressInfo | null;
  /** The proxy's limits in force (its caps fitted under `descriptorLimit`). */
  readonly limits: ProxyLimits;
  /** The open-file limit the caps were fitted under; `null` when none was known. */
  readonly descriptorLimit: number | null;
  /** What `/metrics` serves (`null` without `--admin`): the policy reloader counts its reloads there. */
  readonly metrics: PrometheusMetrics | null;
  /**
   * Stops taking requests and lets those in flight finish (bounded by `drainTimeoutMs`), then drains
   * the outcomes the store could not take yet, marks this life stopped and closes the store.
   */
  stop(): Promise<CloseReport>;
}

/**
 * Opens the store, starts the gate, the admin listener and the proxy, in that order, and serves the
 * embedded store's socket: the one wiring `effectgate proxy` and `effectgate demo` share. Start-up
 * either completes or undoes itself: every resource opened is closed again, newest first, if a later
 * step fails (a port taken, a recovery that cannot reach the store), so a failed start releases the
 * store lock and the caller can exit with one clear line.
 */
export async function startProxy(setup: ProxySetup): Promise<RunningProxy> {
  const { policies, logger, admin, listen } = setup;
  const store = await openStore({
    url: setup.storeUrl,
    migrate: setup.migrate,
    requireExisting: true,
    gate: true,
  });
  const undo: (() => Promise<unknown>)[] = [() => store.close()];
  try {
    // Metrics only with an admin server to serve them: the same object counts in the gate and
    // answers GET /metrics.
    const metrics = admin === null ? undefined : createPrometheusMetrics({ store });
    // Spans only when the standard OTEL_* variables name an endpoint; otherwise no SDK is loaded.
    const tracer = await tracerFromEnv({ logger });
    undo.push(() => tracer.close());
    // Chosen here, not by createGate: the store is passed in open, and only this code knows its
    // URL, which says where an embedded store keeps its key (made beside it at first start).
    const auditKey = await chooseAuditKey({
      keyFile: setup.auditKeyFile,
      storeUrl: setup.storeUrl,
      create: true,
    });
    logAuditKey(auditKey, logger);
    // Registers this life and recovers what earlier lives and dead replicas left in flight before
    // any traffic is taken. On the embedded store the directory lock proves no other gate runs, so
    // every attempt without an outcome is orphaned. From here the gate owns (and closes) the store.
    const gate = await createGate({
      policies,
      store,
      ownStore: true,
      exclusiveStore: store.kind === 'pglite',
      scope: setup.scope,
      instanceId: setup.instanceId,
      heartbeatMs: setup.heartbeatMs,
      ...(setup.runIdleMs === undefined ? {} : { runIdleMs: setup.runIdleMs }),
      staleAfterMs: setup.staleAfterMs,
      drainTimeoutMs: setup.drainTimeoutMs,
      ...(setup.authorityKey === undefined ? {} : { authorityKey: setup.authorityKey }),
      // No key: left out, so the gate warns once that the trail is hash-chained but not sealed.
      ...(auditKey.signer === null ? {} : { auditKey: auditKey.signer }),
      ...(setup.runId === undefined ? {} : { runId: setup.runId }),
      ...(setup.maxBodyBytes === undefined ? {} : { maxBodyBytes: setup.maxBodyBytes }),
      ...(setup.analysisThreads === undefined ? {} : { analysisThreads: setup.analysisThreads }),
      ...(setup.mode === undefined ? {} : { mode: setup.mode }),
      ...(metrics === undefined ? {} : { metrics }),
      tracer,
      logger,
    });
    undo[0] = () => gate.close();
    const proxy = createProxyServer({
      gate,
      egress: policies.egress,
      allowConnectPorts: setup.allowConnectPorts,
      ...(setup.resolve === undefined ? {} : { resolve: setup.resolve }),
      limits: setup.limits,
      logger,
      ...(setup.agents === undefined ? {} : { agents: setup.agents }),
      ...(setup.ca === undefined ? {} : { ca: setup.ca }),
      ...(setup.upstreamCa === undefined ? {} : { upstream: { ca: setup.upstreamCa } }),
    });
    metrics?.countProxy(() => ({ ...proxy.counters() }));
    metrics?.showGeneration(() => gate.generation.generation);
    // The admin listener first: if either port is taken, no governed request has been served.
    const adminServer: AdminServer | null =
      admin === null || metrics === undefined
        ? null
        : createAdminServer({ store, token: setup.adminToken, logger, metrics, payloadKey: gate.payloadKey });
    const adminAddr =
      adminServer === null || admin === null
        ? null
        : await listenOn('--admin', admin, () => adminServer.listen(admin.host, admin.port));
    if (adminServer !== null) undo.push(() => adminServer.close());
    // `egress.deny: gate`: the admin listener is one of the gate's own, known before the proxy
    // serves a request; the proxy adds its own bound address itself.
    if (adminAddr !== null) proxy.setGateAddresses([adminAddr]);
    const addr = await listenOn('--listen', listen, () => proxy.listen(listen.host, listen.port));
    undo.push(() => proxy.close());
    const storeSocket = await serveSocket(store, setup.storeUrl, gate, logger);
    return running(
      gate,
      store,
      proxy,
      adminServer,
      storeSocket,
      addr,
      adminAddr,
      metrics ?? null,
      setup.drainTimeoutMs,
    );
  } catch (err) {
    for (const close of undo.reverse()) await close().catch(() => undefined);
    throw err;
  }
}

/** Resolves on the first SIGINT or SIGTERM (then stops listening for them). */
export function stopSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const stop = (signal: NodeJS.Signals): void => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve(signal);
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}

function running(
  gate: Gate,
  store: Store,
  proxy: ProxyServer,
  adminServer: AdminServer | null,
  storeSocket: StoreSocketServer | null,
  addr: AddressInfo,
  adminAddr: AddressInfo | null,
  metrics: PrometheusMetrics | null,
  drainTimeoutMs: number,
): RunningProxy {
  let stopping: Promise<CloseReport> | null = null;
  return {
    gate,
    store,
    addr,
    adminAddr,
    limits: proxy.limits,
    descriptorLimit: proxy.descriptorLimit,
    metrics,
    stop() {
      // Requests in flight (a governed call at its destination) get their answers within
      // drainTimeoutMs; then the gate drains the outcomes still waiting for the store (its own bound).
      stopping ??= Promise.allSettled([
        proxy.close(drainTimeoutMs),
        adminServer?.close(),
        storeSocket?.close(),
      ]).then(() => gate.close());
      return stopping;
    },
  };
}

/** Says once, at start, which key seals the trail; the gate itself warns when none does. */
function logAuditKey(key: AuditKey, logger: EffectgateLogger): void {
  if (key.signer === null) return;
  const where =
    key.source === 'ephemeral' ? 'a key made for this process (pglite:memory)' : (key.path ?? 'none');
  logger.info(
    { audit_key: where, key_name: key.signer.name, created: key.created },
    key.created
      ? "audit key made: it seals the trail's checkpoints"
      : "audit key seals the trail's checkpoints",
  );
}

/** Commands (operations, approvals, audit verify) reach an embedded store through this gate. */
async function serveSocket(
  store: Store,
  storeUrl: string,
  gate: Gate,
  logger: EffectgateLogger,
): Promise<StoreSocketServer | null> {
  const storeDir = store.kind === 'pglite' ? embeddedStoreDir(storeUrl) : null;
  if (storeDir === null) return null;
  return serveStoreSocket(store, storeDir, { instanceId: gate.instanceId }).catch((err: unknown) => {
    // A store directory no socket address can name (socket-path.ts): the gate refuses to start
    // rather than run with commands that could only say "locked".
    if (err instanceof EffectgateError && err.code === 'EG_ERR_CONFIG_INVALID') throw err;
    logger.warn({ err: String(err) }, 'no store socket: commands cannot inspect this store while it runs');
    return null;
  });
}

/** Binds one listener; a taken or forbidden address is a configuration error naming its flag. */
async function listenOn(flag: string, where: Listen, bind: () => Promise<AddressInfo>): Promise<AddressInfo> {
  try {
    return await bind();
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    const why =
      code === 'EADDRINUSE'
        ? 'address already in use (another process listens there)'
        : code === 'EACCES'
          ? 'permission denied'
          : code === 'EADDRNOTAVAIL'
            ? 'no such local address'
            : (err as Error).message;
    throw new EffectgateError('EG_ERR_CONFIG_INVALID', `${flag} ${where.host}:${where.port}: ${why}`, {
      cause: err,
    });
  }
}
