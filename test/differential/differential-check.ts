/**
 * The differential check for one oracle and one policy folder: for every variant of every tool,
 * is the gate's reading at least as wide as the destination's?
 *
 * 1. The variant goes straight to the oracle: does the framework perform the tool's effect, and
 *    with which arguments?
 * 2. If it does, the canonical request with those very arguments goes through the gate (allowed:
 *    the destination performs it once).
 * 3. The variant goes through the gate. It must be answered by the gate (a duplicate, or a
 *    refusal: nothing sent), or reach the destination as another effect that the gate governed.
 *    It fails when the destination performs the tool's effect again with the same arguments
 *    (keys conflate: `100` and `"100"` are one value), when it performs it ungoverned, or when
 *    it acts without the key's arguments on a request the gate keyed on arguments it read
 *    otherwise. The destination's own answer is the judge, never the gate's account.
 */
import { createHash, randomBytes } from 'node:crypto';
import { canonicalJson, conflateScalars, createGate, type Gate } from '../../src/engine/index.js';
import { foldName, type Tool } from '../../src/policy/index.js';
import { createProxyServer } from '../../src/proxy/index.js';
import { type OracleManifest, type RunningOracle, startOracle } from './oracle-process.js';
import { pasteable, type RawRequest, type RawResponse, sendRaw, toBytes } from './raw-http.js';
import { aim, type Endpoint, oracleRoutes, type PolicyFolder } from './tools-under-test.js';
import { canonicalRequest, type Variant, variants } from './variants.js';

/** What a framework did with a request: the effect it performed, if any. */
interface Reading {
  readonly route: string;
  readonly method: string;
  readonly path: Record<string, unknown>;
  readonly query: Record<string, unknown>;
  readonly body: unknown;
}

export interface Failure {
  readonly oracle: string;
  readonly folder: string;
  readonly tool: string;
  readonly kind: string;
  readonly problem: string;
  /** The variant as bytes, ready to paste (sent to the oracle directly). */
  readonly request: string;
}

export interface DifferentialReport {
  readonly variants: number;
  /** Variants the oracle performed as a governed tool's effect (the ones checked). */
  readonly effects: number;
  readonly answeredByGate: number;
  readonly failures: readonly Failure[];
  /** Variant kinds the oracle performed as the tool's effect at least once. */
  readonly effectKinds: readonly string[];
  /** Canonical requests built from the oracle's reading that the gate did not allow. */
  readonly blockedCanonical: readonly Failure[];
}

export interface DifferentialOptions {
  /** Only these variant kinds (all when absent). */
  readonly kinds?: readonly string[];
  /**
   * A seeded share of the variants (`plain` always kept): the same seed picks the same ones, so a
   * failure is reproduced by running again with the seed it printed.
   */
  readonly sample?: { readonly seed: string; readonly fraction: number };
}

/** Whether the sample keeps `tool`'s `kind` under `seed`. */
function sampled(sample: DifferentialOptions['sample'], tool: string, kind: string): boolean {
  if (sample === undefined || kind === 'plain') return true;
  const h = createHash('sha256').update(`${sample.seed}\u0000${tool}\u0000${kind}`).digest();
  return h.readUInt32BE(0) / 2 ** 32 < sample.fraction;
}

export async function runDifferential(
  manifest: OracleManifest,
  folder: PolicyFolder,
  options: DifferentialOptions = {},
): Promise<DifferentialReport> {
  const oracle = await startOracle(manifest, oracleRoutes(folder));
  let gate: Gate | null = null;
  let proxy: ReturnType<typeof createProxyServer> | null = null;
  try {
    const aimed = aim(folder, oracle.port);
    gate = await createGate({
      policies: aimed.policies,
      store: 'pglite:memory',
      scope: { tenant: 'diff', area: 'diff', agent: manifest.name },
      resolveGovernedHosts: 'loopback',
      analysisThreads: 0,
      authorityKey: 'differential-suite-authority-key',
      storeSocket: false,
    });
    proxy = createProxyServer({ gate });
    const { port: proxyPort } = await proxy.listen('127.0.0.1', 0);
    return await check(oracle, proxyPort, aimed.endpoints, folder.name, options);
  } finally {
    await proxy?.close();
    await gate?.close();
    await oracle.stop();
  }
}

async function check(
  oracle: RunningOracle,
  proxyPort: number,
  endpoints: ReadonlyMap<string, Endpoint>,
  folderName: string,
  options: DifferentialOptions,
): Promise<DifferentialReport> {
  const run = randomBytes(3).toString('hex');
  let n = 0;
  const all: Variant[] = [];
  for (const endpoint of endpoints.values()) {
    for (const tool of endpoint.tools) {
      for (const v of variants(tool, (kind) => `${run}${(n++).toString(36)}${kind.length}`)) {
        if (options.kinds !== undefined && !options.kinds.includes(v.kind)) continue;
        if (sampled(options.sample, tool.id, v.kind)) all.push(v);
      }
    }
  }
  const chosen = all;
  const failures: Failure[] = [];
  const blocked: Failure[] = [];
  let effects = 0;
  let answeredByGate = 0;
  const effectKinds = new Set<string>();
  const authorityOf = (v: Variant): string =>
    `${v.authority === 'name' ? 'localhost' : '127.0.0.1'}:${oracle.port}`;
  for (const [i, v] of chosen.entries()) {
    const authority = authorityOf(v);
    const fail = (problem: string, into = failures): void => {
      into.push({
        oracle: oracle.manifest.name,
        folder: folderName,
        tool: v.tool.id,
        kind: v.kind,
        problem,
        request: pasteable(v.request, authority),
      });
    };
    const direct = readingOf(await sendRaw(oracle.port, toBytes(v.request, authority, false)));
    const tool = direct === null ? null : toolFor(endpoints, direct);
    if (direct === null || tool === null || tool.id !== v.tool.id) continue;
    effects++;
    effectKinds.add(v.kind);
    const runHeader = (suffix: string): readonly [string, string] => [
      'Effectgate-Run',
      `diff-${run}-${i}-${suffix}`,
    ];
    const key = keyOf(tool, direct);
    let baseKey: string | null = null;
    if (key !== null) {
      const base = canonicalRequest(tool, baseArgs(tool, direct));
      const sentBase = await sendRaw(
        proxyPort,
        toBytes(
          { ...base, headers: [...base.headers, runHeader('base')] },
          authorityOf({ ...v, authority: 'address' }),
          true,
        ),
      );
      const baseReading = readingOf(sentBase);
      if (baseReading === null || sentBase.headers['effectgate-verdict'] !== 'allow') {
        // Arguments another framework reads otherwise (an id `7.json` is 7 to Rails) are refused
        // by the reading rule itself: the gate cannot tell them apart, so it sends nothing.
        const refusal = problemType(sentBase) ?? '';
        if (!READING_REFUSALS.has(refusal) && !CONTRACT_REFUSALS.has(refusal)) {
          fail(
            `the canonical request with the destination's arguments was not allowed (${sentBase.status} ${sentBase.body.toString().slice(0, 300)})`,
            blocked,
          );
        }
        continue;
      }
      baseKey = keyOf(tool, baseReading);
    }
    const through = await sendRaw(
      proxyPort,
      toBytes({ ...v.request, headers: [...v.request.headers, runHeader('variant')] }, authority, true),
    );
    const reached = readingOf(through);
    const again = reached === null ? null : toolFor(endpoints, reached);
    if (reached === null || again?.id !== tool.id) {
      answeredByGate++;
      continue;
    }
    const governed = through.headers['effectgate-verdict'] !== undefined;
    const reachedKey = keyOf(tool, reached);
    if (!governed)
      fail(`performed ungoverned (the gate relayed it; the destination read ${describe(reached)})`);
    else if (tool.dedupe === null) continue;
    else if (reachedKey === null)
      fail(
        `performed without the key's arguments as the destination read them (${describe(reached)}): the gate keyed it on arguments it read otherwise`,
      );
    else if (reachedKey === baseKey)
      fail(
        `performed twice with the same arguments (${describe(reached)}): the gate keyed the spellings apart`,
      );
  }
  return {
    variants: chosen.length,
    effects,
    answeredByGate,
    failures,
    effectKinds: [...effectKinds].sort(),
    blockedCanonical: blocked,
  };
}

/** The refusals the reading rule makes (docs/security.md): a request the gate cannot read one way. */
const READING_REFUSALS = new Set([
  'urn:effectgate:problem:ambiguous_route',
  'urn:effectgate:problem:arguments_ambiguous',
  'urn:effectgate:problem:body_unreadable',
]);

/**
 * Refusals a tool's own contract makes of arguments the destination would read: a body member that
 * carries the tool's idempotency key (PagerDuty's `dedup_key`) must be a string, so the object a
 * bracket name makes of it (`dedup_key[x]=…` to Rails, Laravel, Express) is refused, nothing sent —
 * the destination itself refuses a non-string key.
 */
const CONTRACT_REFUSALS = new Set(['urn:effectgate:problem:idempotency_key']);

function problemType(response: RawResponse): string | null {
  try {
    const json = JSON.parse(response.body.toString('utf8')) as { type?: unknown };
    return typeof json.type === 'string' ? json.type : null;
  } catch {
    return null;
  }
}

/** The effect an oracle answer reports, or null (the framework performed nothing). */
function readingOf(response: RawResponse): Reading | null {
  if (response.status !== 201) return null;
  try {
    const json = JSON.parse(response.body.toString('utf8')) as Partial<Reading>;
    if (typeof json.route !== 'string') return null;
    return {
      route: json.route,
      method: String(json.method),
      path: (json.path ?? {}) as Record<string, unknown>,
      query: (json.query ?? {}) as Record<string, unknown>,
      body: json.body ?? null,
    };
  } catch {
    return null;
  }
}

/** The tool an effect is, as the tool's definition reads the destination's arguments. */
function toolFor(endpoints: ReadonlyMap<string, Endpoint>, reading: Reading): Tool | null {
  const endpoint = endpoints.get(reading.route);
  if (endpoint === undefined) return null;
  const body = reading.body === null ? undefined : reading.body;
  for (const tool of endpoint.tools) if (tool.match.matchesBody(body)) return tool;
  return null;
}

/** The tool's key over the destination's arguments, conflated; null when an argument is missing. */
function keyOf(tool: Tool, reading: Reading): string | null {
  if (tool.dedupe === null) return 'no-key';
  const doc = { path: reading.path, query: reading.query, body: reading.body ?? undefined };
  const values: unknown[] = [];
  for (const path of tool.dedupe.key) {
    const found = path.evaluate(doc).filter((v) => v !== undefined && v !== null);
    if (found.length === 0) return null;
    values.push(found.length === 1 ? found[0] : found);
  }
  return canonicalJson(values.map(conflateScalars));
}

/**
 * The canonical request's arguments: the destination's own, with key scalars sent as text (a
 * JSON number the destination read is sent as its string, so a gate that keyed `100` and
 * `"100"` apart is caught).
 */
function baseArgs(
  tool: Tool,
  reading: Reading,
): { path: Record<string, unknown>; query: Record<string, unknown>; body: unknown } {
  const body =
    reading.body !== null && typeof reading.body === 'object' && !Array.isArray(reading.body)
      ? (structuredClone(reading.body) as Record<string, unknown>)
      : {};
  const query: Record<string, unknown> = {};
  for (const path of tool.dedupe?.key ?? []) {
    const m = /^\$\.(body|query)\.([A-Za-z_]\w*)$/.exec(path.expression);
    if (m === null) continue;
    const source = m[1] === 'body' ? body : reading.query;
    const value = source[m[2]!];
    if (value === undefined || value === null || typeof value === 'object') continue;
    if (m[1] === 'body') body[m[2]!] = String(conflateScalars(value));
    else query[m[2]!] = String(conflateScalars(value));
  }
  // Rails and Laravel report merged params as the body: names the query carried stay out of it.
  for (const name of Object.keys(reading.query))
    if (!(tool.dedupe?.key ?? []).some((p) => p.expression === `$.body.${name}`)) delete body[name];
  delete body['_method'];
  // A framework that keeps `title` and `TITLE` apart reports both; the canonical call has the
  // tool's spelling only.
  const spelt = new Set(
    Object.keys(body).filter((k) => (tool.dedupe?.key ?? []).some((p) => p.expression === `$.body.${k}`)),
  );
  for (const name of Object.keys(body)) {
    if (!spelt.has(name) && [...spelt].some((k) => foldName(k) === foldName(name))) delete body[name];
  }
  return { path: reading.path, query, body };
}

function describe(reading: Reading): string {
  const text = JSON.stringify({
    method: reading.method,
    path: reading.path,
    query: reading.query,
    body: reading.body,
  });
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}

export function formatFailures(failures: readonly Failure[]): string {
  return failures
    .map((f) => `[${f.oracle}] ${f.folder} ${f.tool} ${f.kind}: ${f.problem}\n  ${f.request}`)
    .join('\n');
}

export type { RawRequest };
