import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProxyAgent, request } from 'undici';
import { parseListen } from '../config/index.js';
import { loadPolicies } from '../policy/index.js';
import { CertificateAuthority, initCertificateAuthority, type LeafCertificate } from '../proxy/index.js';
import { DemoApi } from './demo-api.js';
import { DEMO_TOOL, demoPolicy } from './demo-policy.js';
import { DemoInterrupted, walkThrough } from './demo-walkthrough.js';
import { createLogger } from './logger.js';
import { type FlagTable, parseFlags } from './parse-flags.js';
import { type RunningProxy, startProxy, stopSignal } from './start-proxy.js';

/** The port policies/example-tracker.yaml governs on 127.0.0.1 (the README's example destination). */
export const EXAMPLE_TRACKER_PORT = 9090;

export const DEMO_OPTIONS = {
  'no-wait': { type: 'boolean', default: false },
  port: { type: 'string', default: '0' },
  'api-only': { type: 'boolean', default: false },
  'api-port': { type: 'string', default: String(EXAMPLE_TRACKER_PORT) },
  tls: { type: 'string' },
  'ca-out': { type: 'string', default: 'stand-in-ca.pem' },
} as const satisfies FlagTable;

export const USAGE = `usage: effectgate demo [--no-wait] [--port PORT]
       effectgate demo --api-only [--api-port PORT] [--tls HOST [--ca-out FILE]]
  Starts a fake issue tracker and the proxy in front of it on 127.0.0.1, on a fresh embedded store in
  a temporary directory, and walks through what the gate does: an allowed effect, a duplicate, a lost
  response, the held retry, its approval and the trail. Then it leaves the admin UI up until Ctrl-C,
  and removes everything it made.
  --no-wait    exit after the walk-through instead of waiting for Ctrl-C
  --port PORT  the admin UI's port on 127.0.0.1 (default 0: any free port)
  --api-only   only the fake issue tracker, for the README's walk-through with npm start: on
               127.0.0.1, where policies/example-tracker.yaml governs it; prints every effect it
               performs, until Ctrl-C
  --api-port PORT  its port with --api-only (default ${EXAMPLE_TRACKER_PORT})
  --tls HOST   with --api-only: serve HTTPS as HOST (say api.github.com, whose create-issue route it
               has), with a certificate from a throwaway CA of its own: a stand-in for trying shipped
               policies (README "Trying shipped policies against a stand-in")
  --ca-out FILE  (default stand-in-ca.pem) where --tls writes that CA's certificate, for the
               gate's upstream-ca setting`;

/** How long the gate waits for calls in flight on Ctrl-C: the demo has none by then. */
const DRAIN_MS = 2_000;

/**
 * `effectgate demo`: a newcomer's tour on this machine only. The proxy is the one `effectgate
 * proxy` starts (`startProxy`), on PGlite in a temporary directory that is removed on exit, with a
 * policy for the fake tracker written there. Exit 0 after a clean stop, 130 when Ctrl-C cut the
 * walk-through short.
 */
export async function runDemo(argv: readonly string[]): Promise<number> {
  const { values, positionals } = parseFlags(
    { args: [...argv], options: DEMO_OPTIONS, allowPositionals: true },
    USAGE,
  );
  if (positionals.length > 0) {
    process.stderr.write(`effectgate: demo takes no arguments\n${USAGE}\n`);
    return 2;
  }
  if (values['api-only']) {
    const port = parseListen('--api-port', `127.0.0.1:${values['api-port']}`).port;
    const tls = values.tls === undefined ? undefined : await standInCertificate(values.tls, values['ca-out']);
    return serveTracker(port, tls, values.tls, values['ca-out']);
  }
  const admin = parseListen('--port', `127.0.0.1:${values.port}`);
  const say = (lines: readonly string[]): void => {
    process.stdout.write(`${lines.join('\n')}\n`);
  };
  // From the start: PGlite takes a few seconds to open, and a Ctrl-C then must still clean up.
  let interrupted = false;
  const signal = stopSignal().then(() => {
    interrupted = true;
  });
  const dir = await mkdtemp(join(tmpdir(), 'effectgate-demo-'));
  try {
    const api = await DemoApi.start();
    try {
      return await withProxy(dir, api, admin, async (proxy, token) => {
        const agent = new ProxyAgent({ uri: `http://127.0.0.1:${proxy.addr.port}`, proxyTunnel: false });
        let operation: string;
        try {
          say(intro(dir, api, proxy));
          operation = await walkThrough({
            api,
            store: proxy.store,
            say,
            interrupted: () => interrupted,
            post: async (url, body, run) => {
              const res = await request(url, {
                method: 'POST',
                dispatcher: agent,
                headers: { 'content-type': 'application/json', 'effectgate-run': run },
                body: JSON.stringify(body),
              });
              const text = await res.body.text();
              return { status: res.statusCode, headers: res.headers, json: parseJson(text) };
            },
          });
        } catch (err) {
          if (err instanceof DemoInterrupted) return 130;
          throw err;
        } finally {
          await agent.close();
        }
        const ui = `http://127.0.0.1:${proxy.adminAddr?.port}/ui`;
        say([
          '',
          'The admin UI shows the same timeline:',
          `  timeline    ${ui}/operations/${operation}`,
          `  log in at   ${ui}/login?next=${encodeURIComponent(`/ui/operations/${operation}`)}`,
          `  token       ${token}`,
          `  (or: curl -H 'Authorization: Bearer ${token}' ${ui}/operations/${operation})`,
        ]);
        if (values['no-wait']) return 0;
        say([
          '',
          'While it runs, the other commands reach its store too, e.g. in another shell:',
          `  npx effectgate trail ${operation} --store ${storeUrlOf(dir)}`,
          '',
          'Press Ctrl-C to stop the demo (it removes its temporary directory).',
        ]);
        await signal;
        return 0;
      });
    } finally {
      await api.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
    say([`effectgate demo stopped; ${dir} removed`]);
  }
}

/** Starts the proxy for the demo, runs `fn` and stops the proxy again, whatever `fn` did. */
async function withProxy(
  dir: string,
  api: DemoApi,
  admin: { readonly host: string; readonly port: number },
  fn: (proxy: RunningProxy, token: string) => Promise<number>,
): Promise<number> {
  const policiesDir = join(dir, 'policies');
  await mkdir(policiesDir);
  await writeFile(join(policiesDir, 'demo.yaml'), demoPolicy(Number(new URL(api.url).port)));
  // A fresh token for a throwaway admin listener: it is printed, so it must not be a real one.
  const token = `demo-${randomBytes(16).toString('hex')}`;
  const proxy = await startProxy({
    policies: await loadPolicies(policiesDir),
    storeUrl: storeUrlOf(dir),
    migrate: true,
    scope: { tenant: 'acme', area: 'support', agent: 'triage-bot' },
    instanceId: 'effectgate-demo',
    listen: { host: '127.0.0.1', port: 0 },
    admin,
    adminToken: token,
    allowConnectPorts: [443, 80],
    limits: {},
    heartbeatMs: 5_000,
    staleAfterMs: 30_000,
    drainTimeoutMs: DRAIN_MS,
    // Warnings only: the walk-through is the demo's output; the JSON log lines would bury it.
    logger: createLogger({ level: process.env['EFFECTGATE_LOG_LEVEL'] ?? 'warn' }),
    // The store is thrown away with the demo, so a random key costs nothing (and no key file is
    // left beside it).
    authorityKey: randomBytes(32).toString('hex'),
    runId: 'demo',
  });
  try {
    return await fn(proxy, token);
  } finally {
    await proxy.stop();
  }
}

/** The embedded store, inside the demo's temporary directory. */
function storeUrlOf(dir: string): string {
  return `pglite:${join(dir, 'store')}`;
}

function intro(dir: string, api: DemoApi, proxy: RunningProxy): string[] {
  return [
    'effectgate demo: what the gate does for an agent, shown on a fake issue tracker on this machine.',
    '',
    `  fake API   ${api.url}  (an issue tracker; it honours Idempotency-Key)`,
    `  proxy      http://127.0.0.1:${proxy.addr.port}  (the agent's HTTP_PROXY)`,
    `  store      ${storeUrlOf(dir)}  (embedded, removed at the end)`,
    `  policy     ${join(dir, 'policies', 'demo.yaml')}`,
    `             tool ${DEMO_TOOL}: same owner, repo and title within 1h = the same issue`,
  ];
}

function parseJson(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/**
 * `demo --api-only`: the fake tracker alone, as the destination the README's agent calls through
 * `npm start`; each POST it records is printed, so a reader sees the destination's own ledger.
 */
/**
 * A key pair for `host` from a throwaway CA made in a temporary directory (removed again), whose
 * certificate is written to `caOut`: what the gate's `--upstream-ca` trusts, and nothing else does.
 */
async function standInCertificate(host: string, caOut: string): Promise<LeafCertificate> {
  const dir = await mkdtemp(join(tmpdir(), 'effectgate-stand-in-ca-'));
  try {
    const caPem = await initCertificateAuthority({ dir });
    const leaf = await (await CertificateAuthority.load(dir)).leafFor(host);
    await writeFile(caOut, caPem);
    return leaf;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function serveTracker(
  port: number,
  tls?: LeafCertificate,
  tlsHost?: string,
  caOut?: string,
): Promise<number> {
  const signal = stopSignal();
  const api = await DemoApi.start({
    port,
    ...(tls === undefined ? {} : { tls }),
    onPost: (post) => {
      const what =
        post.result === 'created'
          ? `created issue #${post.issue?.number} "${post.issue?.title}"`
          : post.result === 'replayed'
            ? `replayed issue #${post.issue?.number} (same Idempotency-Key: created nothing)`
            : 'refused it (422)';
      process.stdout.write(
        `tracker: POST with Idempotency-Key ${post.idempotencyKey ?? '(none)'}: ${what}\n`,
      );
    },
  });
  try {
    process.stdout.write(
      tls === undefined
        ? `example issue tracker listening on ${api.url} (POST /repos/OWNER/REPO/issues; policies/example-tracker.yaml governs it); Ctrl-C stops it\n`
        : `example issue tracker listening on ${api.url} as ${tlsHost} (POST /repos/OWNER/REPO/issues; its CA certificate for the gate's --upstream-ca: ${caOut}); Ctrl-C stops it\n`,
    );
    await signal;
    return 0;
  } finally {
    await api.close();
  }
}
