import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { ADMIN_TOKEN_ENV, resolveAdminToken } from '../admin/index.js';
import {
  checkCount,
  checkInstanceId,
  checkPositiveInt,
  checkScope,
  flagTable,
  formatSettings,
  loadAgentsFile,
  loadProxySettings,
  PROXY_SETTINGS,
  parseListen,
  parsePortList,
  parseResolveEntries,
  type ResolveEntry,
  settingsUsage,
} from '../config/index.js';
import { authorityKeyOf, defaultInstanceId, MIN_AUTHORITY_KEY_LENGTH } from '../engine/index.js';
import { EffectgateError } from '../errors.js';
import { loadPolicies, parseDuration } from '../policy/index.js';
import { CertificateAuthority } from '../proxy/index.js';
import { GATE_MODES, type GateMode, readKeyFile, resolveStoreUrl } from '../store/index.js';
import { createLogger } from './logger.js';
import { type FlagTable, parseFlags } from './parse-flags.js';
import { PolicyReloader } from './policy-reloader.js';
import { startProxy, stopSignal } from './start-proxy.js';

/**
 * The flags of `effectgate proxy` (exported so docker/ manifests are checked against them): one per
 * setting of src/config/proxy-settings.ts, and `--print-config`, an action rather than a setting.
 */
export const PROXY_OPTIONS = {
  ...flagTable(PROXY_SETTINGS),
  'print-config': { type: 'boolean' },
} as const satisfies FlagTable;

/** `effectgate proxy --help`: made from the flag table, so a new flag is never left out. */
export const USAGE = proxyUsage();

/**
 * `effectgate proxy`: the forward proxy on `--listen`, policies from `--policies`, the store from
 * `--store`/`DATABASE_URL`/embedded PGlite. Applies pending migrations unless `--no-migrate`.
 * Every setting comes from a flag, else the environment, else `--config FILE`, else its default;
 * `--print-config` checks them all, prints them and exits before the store is opened.
 * Stops gracefully on SIGINT/SIGTERM; reloads its policies on SIGHUP (and with `--watch` when a
 * file under `--policies` changes).
 */
export async function runProxy(argv: readonly string[]): Promise<number> {
  const flags = parseFlags({ args: [...argv], options: PROXY_OPTIONS }, USAGE).values;
  const settings = await loadProxySettings(flags);
  const { values, where } = settings;
  const listen = parseListen(where('listen'), values.listen);
  const admin = values.admin === undefined ? null : parseListen(where('admin'), values.admin);
  const scopeGiven = (['tenant', 'area', 'agent'] as const).find((name) => settings.isSet(name));
  if (values.agents !== undefined && scopeGiven !== undefined) {
    throw new EffectgateError(
      'EG_ERR_CONFIG_INVALID',
      `${where('agents')} cannot be combined with ${where(scopeGiven)}: with an agents file every scope comes from the credential.`,
    );
  }
  // With --agents every request carries its own scope; this one is never used for a request then.
  const scope = checkScope({ tenant: values.tenant, area: values.area, agent: values.agent });
  const agents = values.agents === undefined ? undefined : await loadAgentsFile(values.agents);
  const maxBodyBytes =
    values['max-body-bytes'] === undefined
      ? undefined
      : checkPositiveInt(where('max-body-bytes'), values['max-body-bytes']);
  const allowConnectPorts =
    values['allow-connect-ports'] === undefined
      ? [443, 80]
      : [443, 80, ...parsePortList(where('allow-connect-ports'), values['allow-connect-ports'])];
  const resolve =
    values.resolve === undefined
      ? undefined
      : resolveTable(parseResolveEntries(where('resolve'), values.resolve));
  // Loaded before anything is opened, so a missing CA or trust file fails the start cleanly.
  const ca = values['ca-dir'] === undefined ? undefined : await CertificateAuthority.load(values['ca-dir']);
  const upstreamCa =
    values['upstream-ca'] === undefined
      ? undefined
      : await readUpstreamCa(where('upstream-ca'), values['upstream-ca']);
  const logger = createLogger({ level: values['log-level'] });
  const heartbeatMs = positiveDuration(where('heartbeat'), values.heartbeat);
  const runIdleMs = positiveDuration(where('run-idle'), values['run-idle']);
  const staleAfterMs = positiveDuration(where('stale-after'), values['stale-after']);
  const drainTimeoutMs = positiveDuration(where('drain-timeout'), values['drain-timeout']);
  const analysisThreads =
    values['analysis-threads'] === undefined
      ? undefined
      : checkCount(where('analysis-threads'), values['analysis-threads']);
  // Only the limits given; the rest keep DEFAULT_PROXY_LIMITS (src/proxy/proxy-limits.ts).
  const limits = {
    ...(values['max-connections'] === undefined
      ? {}
      : { maxConnections: checkPositiveInt(where('max-connections'), values['max-connections']) }),
    ...(values['max-connections-per-client'] === undefined
      ? {}
      : {
          maxConnectionsPerClient: checkPositiveInt(
            where('max-connections-per-client'),
            values['max-connections-per-client'],
          ),
        }),
    ...(values['keep-alive-timeout'] === undefined
      ? {}
      : { keepAliveTimeoutMs: positiveDuration(where('keep-alive-timeout'), values['keep-alive-timeout']) }),
    ...(values['tunnel-peek-timeout'] === undefined
      ? {}
      : {
          tunnelPeekTimeoutMs: positiveDuration(where('tunnel-peek-timeout'), values['tunnel-peek-timeout']),
        }),
    ...(values['tunnel-idle-timeout'] === undefined
      ? {}
      : {
          tunnelIdleTimeoutMs: positiveDuration(where('tunnel-idle-timeout'), values['tunnel-idle-timeout']),
        }),
  };
  // Stable across restarts, so this gate's next start recovers what this life leaves in flight.
  // Checked here, before anything is opened; createGate checks its own option the same way.
  const instanceId = checkInstanceId(values['instance-id'] ?? defaultInstanceId({ listen }));
  // At most one of the two forms is set here (resolveSettings keeps the one from the higher source).
  const configuredToken = await resolveAdminToken({
    file: values['admin-token-file'],
    env: { [ADMIN_TOKEN_ENV]: values['admin-token'] },
  });
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
      ? values['authority-key'] === undefined
        ? undefined
        : checkAuthorityKey(where('authority-key'), values['authority-key'])
      : await readAuthorityKey(where('authority-key-file'), values['authority-key-file']);

  const mode = gateMode(where('mode'), values.mode);
  const policies = await loadPolicies(values.policies);
  // DATABASE_URL is already the store setting's environment variable: not read a second time here.
  const storeUrl = resolveStoreUrl(values.store, {});
  if (flags['print-config'] === true) {
    process.stdout.write(formatSettings(settings));
    return 0;
  }
  // Opening an embedded store the first time takes seconds: say so, so a newcomer waits for the
  // listening line instead of sending a first call that finds nothing on the port.
  process.stdout.write(
    `effectgate proxy starting: opening the store (${storeUrl.startsWith('postgres') ? 'postgres' : storeUrl}) and recovering what an earlier run left in flight…\n`,
  );
  const {
    gate,
    store,
    addr,
    adminAddr,
    metrics,
    stop,
    limits: inForce,
    descriptorLimit,
  } = await startProxy({
    policies,
    storeUrl,
    migrate: !values['no-migrate'],
    scope,
    instanceId,
    listen,
    admin,
    adminToken,
    allowConnectPorts,
    ...(resolve === undefined ? {} : { resolve }),
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
    ...(values['audit-key-file'] === undefined ? {} : { auditKeyFile: values['audit-key-file'] }),
    runId: values['run-id'],
    maxBodyBytes,
    analysisThreads,
    mode,
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
      // The caps in force: fitted under the open-file limit, so they may be lower than configured.
      connections: {
        max: inForce.maxConnections,
        per_client: inForce.maxConnectionsPerClient,
        descriptor_limit: descriptorLimit,
      },
      scope: agents === undefined ? scope : `per credential (${agents.size} agents from ${values.agents})`,
      run: gate.runId ?? `derived per scope and client address, new after ${values['run-idle']} idle`,
      instance: gate.instanceId,
      https: ca === undefined ? 'tunnelled' : 'intercepted for governed hosts',
      mode: mode === 'shadow' ? 'shadow: verdicts recorded as would_*, nothing refused' : 'enforce',
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

/** `--resolve` entries as the proxy looks them up: `host:port` → where it is dialled. */
function resolveTable(entries: readonly ResolveEntry[]): ReadonlyMap<string, { host: string; port: number }> {
  return new Map(entries.map((e) => [`${e.host}:${e.port}`, { host: e.address, port: e.addressPort }]));
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
 * Secret, say): its first line, at least 32 characters; a file other users can read is refused.
 * Its group may read it: a Secret mounted with an `fsGroup` is 0440 for a non-root gate.
 */
async function readAuthorityKey(name: string, file: string): Promise<string> {
  const content = await readKeyFile(file, { groupReadable: true });
  return authorityKeyOf((content as Buffer).toString('utf8'), `${name} ${file}`);
}

/**
 * EFFECTGATE_AUTHORITY_KEY as given (not trimmed: the key of fingerprints already recorded), at
 * least as long as a key file's: a short key is a dictionary away from a database dump.
 */
function checkAuthorityKey(where: string, key: string): string {
  if (key.length < MIN_AUTHORITY_KEY_LENGTH) {
    throw new EffectgateError(
      'EG_ERR_CONFIG_INVALID',
      `${where}: the key must be at least ${MIN_AUTHORITY_KEY_LENGTH} characters (e.g. openssl rand -hex 32)`,
    );
  }
  return key;
}

/**
 * The PEM trust anchors added to the system CAs for HTTPS upstreams. Node's `ca` option replaces
 * the defaults, so the system store is prepended.
 */
async function readUpstreamCa(name: string, file: string): Promise<string> {
  let pem: string;
  try {
    pem = await readFile(file, 'utf8');
  } catch (err) {
    throw new EffectgateError('EG_ERR_CONFIG_INVALID', `${name} ${file}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) {
    throw new EffectgateError('EG_ERR_CONFIG_INVALID', `${name} ${file} holds no PEM certificate.`);
  }
  return pem;
}

function proxyUsage(): string {
  return [
    'usage: effectgate proxy [flags]        (--print-config: check and print the settings, then exit)',
    ...settingsUsage(PROXY_SETTINGS),
    'precedence: flag > environment variable > --config file (keys: the flag names) > default',
    '(see README.md "Configuration" and "Commands" for what each does)',
  ].join('\n');
}

/** 127.0.0.0/8, ::1 and localhost: an admin listener no other machine reaches. */
function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/** `host:port` as a URL holds it: an IPv6 address in brackets. */
function origin(addr: { readonly address: string; readonly port: number }): string {
  return addr.address.includes(':') ? `[${addr.address}]:${addr.port}` : `${addr.address}:${addr.port}`;
}

/** `--mode`: `shadow` records every verdict as would_* and refuses nothing (docs/design.md §2). */
function gateMode(name: string, value: string): GateMode {
  if ((GATE_MODES as readonly string[]).includes(value)) return value as GateMode;
  throw new EffectgateError(
    'EG_ERR_CONFIG_INVALID',
    `${name} must be ${GATE_MODES.join(' or ')}; got ${JSON.stringify(value)}`,
  );
}
