import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { resolveAdminToken } from '../admin/index.js';
import {
  checkCount,
  checkInstanceId,
  checkPositiveInt,
  loadAgentsFile,
  parseListen,
  parsePortList,
  scopeFromFlagsAndEnv,
} from '../config/index.js';
import { defaultInstanceId } from '../engine/index.js';
import { EffectgateError } from '../errors.js';
import { loadPolicies, parseDuration } from '../policy/index.js';
import { CertificateAuthority, DEFAULT_PROXY_LIMITS } from '../proxy/index.js';
import { resolveStoreUrl } from '../store/index.js';
import { createLogger } from './logger.js';
import { type FlagTable, parseFlags } from './parse-flags.js';
import { PolicyReloader } from './policy-reloader.js';
import { startProxy, stopSignal } from './start-proxy.js';

/** The flags of `effectgate proxy` (exported so docker/ manifests are checked against them). */
export const PROXY_OPTIONS = {
  listen: { type: 'string', default: '127.0.0.1:8080' },
  admin: { type: 'string' },
  policies: { type: 'string', default: 'policies' },
  watch: { type: 'boolean', default: false },
  store: { type: 'string' },
  tenant: { type: 'string' },
  area: { type: 'string' },
  agent: { type: 'string' },
  agents: { type: 'string' },
  'no-migrate': { type: 'boolean', default: false },
  'max-body-bytes': { type: 'string' },
  'allow-connect-ports': { type: 'string' },
  'run-id': { type: 'string' },
  'run-idle': { type: 'string', default: '15m' },
  'ca-dir': { type: 'string' },
  'upstream-ca': { type: 'string' },
  'admin-token-file': { type: 'string' },
  heartbeat: { type: 'string', default: '5s' },
  'stale-after': { type: 'string', default: '30s' },
  'instance-id': { type: 'string' },
  'drain-timeout': { type: 'string', default: '10s' },
  'authority-key-file': { type: 'string' },
  'max-connections': { type: 'string' },
  'max-connections-per-client': { type: 'string' },
  'keep-alive-timeout': { type: 'string' },
  'tunnel-peek-timeout': { type: 'string' },
  'tunnel-idle-timeout': { type: 'string' },
  'analysis-threads': { type: 'string' },
} as const satisfies FlagTable;

/**
 * What a flag without a parseArgs default means when it is left out (the value lives with the code
 * that applies it), so `effectgate proxy --help` shows every flag's default.
 */
const PROXY_DEFAULTS: Readonly<Partial<Record<keyof typeof PROXY_OPTIONS, string>>> = {
  admin: 'none: no admin API, no /metrics',
  watch: 'off: policies reload on SIGHUP only',
  store: 'DATABASE_URL, else pglite:./.effectgate',
  tenant: 'EFFECTGATE_TENANT, else default',
  area: 'EFFECTGATE_AREA, else default',
  agent: 'EFFECTGATE_AGENT, else agent',
  agents: 'none: one scope from --tenant/--area/--agent',
  'max-body-bytes': String(1024 * 1024),
  'allow-connect-ports': 'none beyond 443,80',
  'run-id': 'a new id per start',
  'ca-dir': 'none: TLS to a governed host is refused',
  'upstream-ca': 'none: the system CAs only',
  'admin-token-file': 'none: the token in EFFECTGATE_ADMIN_TOKEN',
  'instance-id': 'EFFECTGATE_INSTANCE_ID, else derived from the host name and --listen',
  'authority-key-file': 'EFFECTGATE_AUTHORITY_KEY, else a key kept in the store',
  'max-connections': String(DEFAULT_PROXY_LIMITS.maxConnections),
  'max-connections-per-client': String(DEFAULT_PROXY_LIMITS.maxConnectionsPerClient),
  'keep-alive-timeout': seconds(DEFAULT_PROXY_LIMITS.keepAliveTimeoutMs),
  'tunnel-peek-timeout': seconds(DEFAULT_PROXY_LIMITS.tunnelPeekTimeoutMs),
  'tunnel-idle-timeout': seconds(DEFAULT_PROXY_LIMITS.tunnelIdleTimeoutMs),
  'analysis-threads': '1',
};

/** `effectgate proxy --help`: made from the flag table, so a new flag is never left out. */
export const USAGE = proxyUsage();

/**
 * `effectgate proxy`: the forward proxy on `--listen`, policies from `--policies`, the store from
 * `--store`/`DATABASE_URL`/embedded PGlite. Applies pending migrations unless `--no-migrate`.
 * Stops gracefully on SIGINT/SIGTERM; reloads its policies on SIGHUP (and with `--watch` when a
 * file under `--policies` changes).
 */
export async function runProxy(argv: readonly string[]): Promise<number> {
  const { values } = parseFlags({ args: [...argv], options: PROXY_OPTIONS }, USAGE);
  const listen = parseListen('--listen', values.listen);
  const admin = values.admin === undefined ? null : parseListen('--admin', values.admin);
  if (
    values.agents !== undefined &&
    [values.tenant, values.area, values.agent].some((v) => v !== undefined)
  ) {
    throw new EffectgateError(
      'EG_ERR_CONFIG_INVALID',
      '--agents cannot be combined with --tenant/--area/--agent: with an agents file every scope comes from the credential.',
    );
  }
  // With --agents every request carries its own scope; this one is never used for a request then.
  const scope = scopeFromFlagsAndEnv(values);
  const agents = values.agents === undefined ? undefined : await loadAgentsFile(values.agents);
  const maxBodyBytes =
    values['max-body-bytes'] === undefined
      ? undefined
      : checkPositiveInt('--max-body-bytes', values['max-body-bytes']);
  const allowConnectPorts =
    values['allow-connect-ports'] === undefined
      ? [443, 80]
      : [443, 80, ...parsePortList('--allow-connect-ports', values['allow-connect-ports'])];
  // Loaded before anything is opened, so a missing CA or trust file fails the start cleanly.
  const ca = values['ca-dir'] === undefined ? undefined : await CertificateAuthority.load(values['ca-dir']);
  const upstreamCa =
    values['upstream-ca'] === undefined ? undefined : await readUpstreamCa(values['upstream-ca']);
  const logger = createLogger({ level: process.env['EFFECTGATE_LOG_LEVEL'] ?? 'info' });
  const heartbeatMs = positiveDuration('--heartbeat', values.heartbeat);
  const runIdleMs = positiveDuration('--run-idle', values['run-idle']);
  const staleAfterMs = positiveDuration('--stale-after', values['stale-after']);
  const drainTimeoutMs = positiveDuration('--drain-timeout', values['drain-timeout']);
  const analysisThreads =
    values['analysis-threads'] === undefined
      ? undefined
      : checkCount('--analysis-threads', values['analysis-threads']);
  // Only the limits given; the rest keep DEFAULT_PROXY_LIMITS (src/proxy/proxy-limits.ts).
  const limits = {
    ...(values['max-connections'] === undefined
      ? {}
      : { maxConnections: checkPositiveInt('--max-connections', values['max-connections']) }),
    ...(values['max-connections-per-client'] === undefined
      ? {}
      : {
          maxConnectionsPerClient: checkPositiveInt(
            '--max-connections-per-client',
            values['max-connections-per-client'],
          ),
        }),
    ...(values['keep-alive-timeout'] === undefined
      ? {}
      : { keepAliveTimeoutMs: positiveDuration('--keep-alive-timeout', values['keep-alive-timeout']) }),
    ...(values['tunnel-peek-timeout'] === undefined
      ? {}
      : { tunnelPeekTimeoutMs: positiveDuration('--tunnel-peek-timeout', values['tunnel-peek-timeout']) }),
    ...(values['tunnel-idle-timeout'] === undefined
      ? {}
      : { tunnelIdleTimeoutMs: positiveDuration('--tunnel-idle-timeout', values['tunnel-idle-timeout']) }),
  };
  // Stable across restarts, so this gate's next start recovers what this life leaves in flight.
  // Checked here, before anything is opened; createGate checks its own option the same way.
  const instanceId = checkInstanceId(
    values['instance-id'] === undefined
      ? (process.env['EFFECTGATE_INSTANCE_ID'] ?? defaultInstanceId({ listen }))
      : values['instance-id'],
  );
  const configuredToken = await resolveAdminToken({ file: values['admin-token-file'] });
  // No token given and the admin listener only on loopback (npm start): one for this run, printed
  // below, so the pages work on a fresh clone. Anything reachable from elsewhere still needs one
  // chosen on purpose (EFFECTGATE_ADMIN_TOKEN, --admin-token-file), else /api and /ui stay shut.
  const oneRunToken =
    configuredToken === null && admin !== null && isLoopbackHost(admin.host)
      ? `eg-${randomBytes(16).toString('hex')}`
      : null;
  const adminToken = configuredToken ?? oneRunToken;
  const authorityKey =
    values['authority-key-file'] === undefined
      ? undefined
      : await readAuthorityKey(values['authority-key-file']);

  const policies = await loadPolicies(values.policies);
  const storeUrl = resolveStoreUrl(values.store);
  // Opening an embedded store the first time takes seconds: say so, so a newcomer waits for the
  // listening line instead of sending a first call that finds nothing on the port.
  process.stdout.write(
    `effectgate proxy starting: opening the store (${storeUrl.startsWith('postgres') ? 'postgres' : storeUrl}) and recovering what an earlier run left in flight…\n`,
  );
  const { gate, store, addr, adminAddr, metrics, stop } = await startProxy({
    policies,
    storeUrl,
    migrate: !values['no-migrate'],
    scope,
    instanceId,
    listen,
    admin,
    adminToken,
    allowConnectPorts,
    limits,
    heartbeatMs,
    runIdleMs,
    staleAfterMs,
    drainTimeoutMs,
    logger,
    agents,
    ca,
    upstreamCa,
    authorityKey,
    runId: values['run-id'],
    maxBodyBytes,
    analysisThreads,
  });
  // Signal handlers only once everything is listening; from here a SIGTERM drains and stops, and
  // a SIGHUP reloads the policies (before, node's default for SIGHUP ends the process).
  const stopped = stopSignal();
  const reloader = new PolicyReloader({
    path: values.policies,
    gate,
    logger,
    metrics,
    watch: values.watch,
  });
  await reloader.start();
  logger.info(
    {
      listen: origin(addr),
      admin: adminAddr === null ? null : origin(adminAddr),
      store: store.kind === 'postgres' ? 'postgres' : storeUrl,
      tools: policies.tools.map((t) => t.id),
      default: policies.default,
      scope: agents === undefined ? scope : `per credential (${agents.size} agents from ${values.agents})`,
      run: gate.runId ?? `derived per scope and client address, new after ${values['run-idle']} idle`,
      instance: gate.instanceId,
      https: ca === undefined ? 'tunnelled' : 'intercepted for governed hosts',
      policies: {
        generation: gate.generation.generation,
        digest: gate.generation.digest,
        watch: values.watch,
      },
    },
    'effectgate proxy listening',
  );
  process.stdout.write(
    `effectgate proxy listening on http://${origin(addr)} (store ${store.kind === 'postgres' ? 'postgres' : storeUrl}, ${policies.tools.length} tool(s))\n${adminAddr === null ? '' : `effectgate admin listening on http://${origin(adminAddr)}\n`}${adminAddr === null || oneRunToken === null ? '' : `  timeline pages: http://${origin(adminAddr)}/ui/  admin token for this run: ${oneRunToken}\n  (set EFFECTGATE_ADMIN_TOKEN or --admin-token-file to choose your own)\n`}`,
  );

  await stopped;
  reloader.close();
  logger.info({}, 'effectgate proxy stopping');
  const report = await stop();
  logger.info(
    { unwritten_outcomes: report.unwrittenOutcomes, abandoned_calls: report.abandonedCalls },
    'effectgate proxy stopped',
  );
  process.stdout.write(
    `effectgate proxy stopped (${report.unwrittenOutcomes} outcome(s) not written${report.unwrittenOutcomes > 0 ? ': recovered as unknown on the next start of this instance' : ''})\n`,
  );
  return 0;
}

function positiveDuration(flag: string, text: string): number {
  let ms: number | null = null;
  try {
    ms = parseDuration(text);
  } catch {
    // Reported below with the flag's name.
  }
  if (ms === null || ms <= 0) {
    throw new EffectgateError(
      'EG_ERR_CONFIG_INVALID',
      `${flag} must be a duration like 500ms, 5s or 1m, not ${JSON.stringify(text)}`,
    );
  }
  return ms;
}

/**
 * The HMAC key of credential fingerprints from a file kept outside the database (a Kubernetes
 * secret, say): its first line, at least 32 characters.
 */
async function readAuthorityKey(file: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new EffectgateError(
      'EG_ERR_CONFIG_INVALID',
      `--authority-key-file ${file}: ${(err as Error).message}`,
      {
        cause: err,
      },
    );
  }
  const key = text.split(/\r?\n/, 1)[0]?.trim() ?? '';
  if (key.length < 32) {
    throw new EffectgateError(
      'EG_ERR_CONFIG_INVALID',
      `--authority-key-file ${file}: the key must be at least 32 characters (e.g. openssl rand -hex 32)`,
    );
  }
  return key;
}

/**
 * The PEM trust anchors added to the system CAs for HTTPS upstreams. Node's `ca` option replaces
 * the defaults, so the system store is prepended.
 */
async function readUpstreamCa(file: string): Promise<string> {
  let pem: string;
  try {
    pem = await readFile(file, 'utf8');
  } catch (err) {
    throw new EffectgateError('EG_ERR_CONFIG_INVALID', `--upstream-ca ${file}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) {
    throw new EffectgateError('EG_ERR_CONFIG_INVALID', `--upstream-ca ${file} holds no PEM certificate.`);
  }
  return pem;
}

function proxyUsage(): string {
  const flags = Object.entries(PROXY_OPTIONS).map(([name, o]) => {
    const value = o.type === 'boolean' ? '' : ` ${name.replace(/-/g, '_').toUpperCase()}`;
    const fallback =
      'default' in o && o.type !== 'boolean'
        ? String(o.default)
        : PROXY_DEFAULTS[name as keyof typeof PROXY_OPTIONS];
    return `  --${name}${value}${fallback === undefined ? '' : ` (default ${fallback})`}`;
  });
  return `usage: effectgate proxy [flags]\n${flags.join('\n')}\n(see README.md "Commands" for what each does)`;
}

/** `120000` → `2m`, `5000` → `5s`: a duration as the flags take it. */
function seconds(ms: number): string {
  return ms % 60_000 === 0 ? `${ms / 60_000}m` : ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}

/** 127.0.0.0/8, ::1 and localhost: an admin listener no other machine reaches. */
function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/** `host:port` as a URL holds it: an IPv6 address in brackets. */
function origin(addr: { readonly address: string; readonly port: number }): string {
  return addr.address.includes(':') ? `[${addr.address}]:${addr.port}` : `${addr.address}:${addr.port}`;
}
