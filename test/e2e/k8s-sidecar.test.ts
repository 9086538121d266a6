/**
 * The gate run the way deploy/k8s/ runs it, as far as a machine without a cluster can: the built
 * CLI started with the sidecar container's exact args, after the migration Job's own args, with
 * what Kubernetes would mount swapped for temporary files (a freshly `ca init`-ed CA for the
 * Secret, the ConfigMap's policy written out) and DATABASE_URL for the Secret. Only the ports
 * (free ones) and the governed host (a local TLS destination instead of api.github.com, trusted
 * through --upstream-ca) change: the point is that those args start a gate that is ready and
 * intercepts the ConfigMap's tool over HTTPS. The ca-bundle init container's args run first, as in
 * the pod, and the agent container's own environment (its CA variables at the swapped mounts) is
 * given to curl, Python and Node: each must trust the gate's leaf for the governed host and, where
 * its variable replaces the system roots, also a host the gate only tunnels (a stand-in "system
 * root" added with --system: the image's Node roots do not know a loopback test certificate).
 */
import { execFile } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ProxyAgent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { type ProxyProcess, runCli, startProxyProcess } from '../helpers/proxy-process.js';
import { reply, selfSignedCert, startUpstream, type Upstream } from '../helpers/upstream.js';

// biome-ignore lint/suspicious/noExplicitAny: parsed manifests are walked by shape
type Obj = Record<string, any>;

const k8s = new URL('../../deploy/k8s/', import.meta.url).pathname;
const manifest = (file: string): Obj =>
  parseAllDocuments(readFileSync(join(k8s, file), 'utf8'))[0]!.toJS() as Obj;
const deployment = manifest('deployment.yaml');
const pod = deployment['spec']['template']['spec'] as Obj;
const gate = (pod['initContainers'] as Obj[]).find((c) => c['name'] === 'effectgate')!;
const bundler = (pod['initContainers'] as Obj[]).find((c) => c['name'] === 'ca-bundle')!;
const agentSpec = (pod['containers'] as Obj[]).find((c) => c['name'] === 'agent')!;
const job = manifest('migrate-job.yaml')['spec']['template']['spec']['containers'][0] as Obj;
const policies = manifest('policies-configmap.yaml')['data'] as Record<string, string>;

/** Where the pod spec mounts `volume` in the gate container. */
const mountPath = (volume: string): string =>
  (gate['volumeMounts'] as Obj[]).find((m) => m['name'] === volume)!['mountPath'];
const run = promisify(execFile);
const REPO = new URL('../../', import.meta.url).pathname;

/** `value` with the container's mount path it starts with replaced by that volume's local folder. */
function swapMounts(container: Obj, local: Record<string, string>, value: string): string {
  for (const m of container['volumeMounts'] as Obj[]) {
    const path = m['mountPath'] as string;
    if (value === path || value.startsWith(`${path}/`)) return local[m['name']]! + value.slice(path.length);
  }
  return value;
}

describe('the k8s sidecar args, run as the built CLI', () => {
  let dir: string;
  let upstream: Upstream;
  let proxy: ProxyProcess;
  let tunnelled: Upstream;
  /** The agent container's environment, its mounts swapped for the local folders. */
  let agentEnv: NodeJS.ProcessEnv;
  const token = 'k8s-sidecar-test-token-0123456789';
  const upstreamCert = selfSignedCert();

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'effectgate-e2e-k8s-'));
    upstream = await startUpstream(reply(201, { html_url: 'https://issues.example.test/7' }), {
      tls: upstreamCert,
    });
    // A host no tool names: the gate tunnels it, so the agent sees its own certificate.
    tunnelled = await startUpstream(reply(200), { tls: upstreamCert });
    // The Secret effectgate-ca, made as the README makes it.
    expect((await runCli(['ca', 'init', '--dir', join(dir, 'ca')])).code).toBe(0);
    // The ConfigMap, its governed host pointed at the local destination.
    mkdirSync(join(dir, 'policies'));
    for (const [file, text] of Object.entries(policies)) {
      writeFileSync(join(dir, 'policies', file), text.replaceAll('api.github.com', '127.0.0.1'));
    }
    writeFileSync(join(dir, 'upstream.pem'), upstreamCert.cert);
    const env = { DATABASE_URL: `pglite:${join(dir, 'store')}`, EFFECTGATE_ADMIN_TOKEN: token };
    // The Job first: the gate runs --no-migrate and would refuse a store never migrated.
    const migrated = await runCli(job['args'], env);
    expect(migrated.code, migrated.stderr).toBe(0);
    // The Secret effectgate-authority, as Kubernetes mounts it under the fsGroup: 0440.
    mkdirSync(join(dir, 'authority'));
    writeFileSync(join(dir, 'authority', 'authority.key'), `${'5e'.repeat(32)}\n`, { mode: 0o440 });
    // The Secret effectgate-audit: made as its comment says (keys audit), mounted 0440 as well.
    mkdirSync(join(dir, 'audit'));
    const madeAudit = await runCli(['keys', 'audit', '--out', join(dir, 'audit', 'audit.key')]);
    expect(madeAudit.code, madeAudit.stderr).toBe(0);
    chmodSync(join(dir, 'audit', 'audit.key'), 0o440);
    const swaps: Record<string, string> = {
      [mountPath('policies')]: join(dir, 'policies'),
      [mountPath('ca')]: join(dir, 'ca'),
      [`${mountPath('authority')}/authority.key`]: join(dir, 'authority', 'authority.key'),
      [`${mountPath('audit')}/audit.key`]: join(dir, 'audit', 'audit.key'),
    };
    const args = (gate['args'] as string[]).slice(1).map((arg) => {
      if (arg.startsWith('--listen=') || arg.startsWith('--admin='))
        return arg.replace(/=.*/, '=127.0.0.1:0');
      const [flag, value] = arg.split('=');
      return value !== undefined && swaps[value] !== undefined ? `${flag}=${swaps[value]}` : arg;
    });
    expect(args).toContain('--no-migrate');
    expect(args).toContain(`--ca-dir=${join(dir, 'ca')}`);
    expect(args).toContain(`--authority-key-file=${join(dir, 'authority', 'authority.key')}`);
    expect(args).toContain(`--audit-key-file=${join(dir, 'audit', 'audit.key')}`);
    // The ca-bundle init container, its volumes as folders: the certificate-only projection of
    // the Secret (ca-cert) and the emptyDir (trust) the agent reads.
    mkdirSync(join(dir, 'ca-cert'));
    copyFileSync(join(dir, 'ca', 'ca.pem'), join(dir, 'ca-cert', 'ca.pem'));
    mkdirSync(join(dir, 'trust'));
    const local = { 'ca-cert': join(dir, 'ca-cert'), trust: join(dir, 'trust') };
    const bundleArgs = (bundler['args'] as string[]).map((arg) => {
      const [flag, value] = arg.split('=');
      return value === undefined ? arg : `${flag}=${swapMounts(bundler, local, value)}`;
    });
    // The stand-in system root: what the image's own roots are for api.github.com.
    const bundled = await runCli([...bundleArgs, `--system=${join(dir, 'upstream.pem')}`]);
    expect(bundled.code, bundled.stderr).toBe(0);
    proxy = await startProxyProcess(
      [
        ...args,
        // The local destinations' ports and self-signed root: what api.github.com:443 needs not.
        `--allow-connect-ports=${upstream.port},${tunnelled.port}`,
        `--upstream-ca=${join(dir, 'upstream.pem')}`,
      ],
      // No audit key from this machine's environment: only the manifest's flag counts.
      { ...env, EFFECTGATE_AUDIT_KEY_FILE: '', EFFECTGATE_LOG_LEVEL: 'info' },
    );
    // This machine's own CA and proxy settings dropped: only the manifest's count. Its NO_PROXY
    // is dropped too: it lists 127.0.0.1, which here stands for the governed api.github.com.
    agentEnv = Object.fromEntries(
      Object.entries(process.env).filter(
        ([name]) =>
          !/^(CURL_CA_BUNDLE|SSL_CERT_FILE|SSL_CERT_DIR|REQUESTS_CA_BUNDLE|NIX_SSL_CERT_FILE)$/.test(name) &&
          !/_proxy$/i.test(name),
      ),
    );
    for (const e of agentSpec['env'] as Obj[]) {
      if (/^no_proxy$/i.test(e['name'])) continue;
      agentEnv[e['name']] = /_proxy$/i.test(e['name']) ? proxy.url : swapMounts(agentSpec, local, e['value']);
    }
  }, 120_000);

  afterAll(async () => {
    await proxy?.stop();
    await upstream?.close();
    await tunnelled?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('answers the probes the pod spec names', async () => {
    for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) {
      const res = await fetch(`${proxy.adminUrl}${gate[probe]['httpGet']['path']}`);
      expect(res.status, probe).toBe(200);
    }
  });

  it('seals the trail with the audit key read from the mounted Secret (0440), never a key of its own', () => {
    const logs = proxy
      .stderr()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Obj);
    const key = logs.find((l) => l['audit_key'] !== undefined);
    expect(key, proxy.stderr()).toMatchObject({ audit_key: join(dir, 'audit', 'audit.key'), created: false });
    expect(proxy.stderr()).not.toContain('no audit key');
  });

  it("intercepts the ConfigMap's tool over HTTPS: 201 allow, then 409 duplicate, one request out", async () => {
    const agent = new ProxyAgent({
      uri: proxy.url,
      requestTls: { ca: readFileSync(join(dir, 'ca', 'ca.pem'), 'utf8') },
    });
    try {
      const create = async (): Promise<[number, string | null]> => {
        const res = await undiciFetch(`https://127.0.0.1:${upstream.port}/repos/acme/api/issues`, {
          method: 'POST',
          dispatcher: agent,
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ title: 'Disk full' }),
        });
        await res.arrayBuffer();
        return [res.status, res.headers.get('effectgate-verdict')];
      };
      expect(await create()).toEqual([201, 'allow']);
      expect(await create()).toEqual([409, 'duplicate']);
      expect(upstream.requests).toHaveLength(1);
      expect(upstream.requests[0]!.headers['idempotency-key']).toBeDefined();
    } finally {
      await agent.close();
    }
  });
  it('the trail it sealed verifies against the same mounted key, through the running gate', async () => {
    const verify = () =>
      runCli(
        [
          'audit',
          'verify',
          '--store',
          `pglite:${join(dir, 'store')}`,
          '--audit-key-file',
          join(dir, 'audit', 'audit.key'),
        ],
        { EFFECTGATE_AUDIT_KEY_FILE: '' },
      );
    // The sealer signs a checkpoint within an interval of the calls above: wait for the first.
    let result = await verify();
    for (let i = 0; i < 20 && result.code === 0 && /no checkpoint yet/.test(result.stdout); i++) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      result = await verify();
    }
    expect(result.code, result.stdout + result.stderr).toBe(0);
    expect(result.stdout).toContain('audit chain intact');
    expect(result.stdout).toMatch(/audit log sealed: [1-9]\d* checkpoint\(s\) checked/);
    expect(result.stdout).toMatch(/signatures checked against effectgate-audit-/);
  }, 30_000);

  it("the agent's own environment: curl and Python verify the governed host's leaf and a tunnelled host's certificate with the bundle", async () => {
    expect(agentEnv['SSL_CERT_FILE']).toBe(join(dir, 'trust', 'ca-bundle.pem'));
    const governed = `https://127.0.0.1:${upstream.port}/repos/acme/api/issues`;
    const other = `https://localhost:${tunnelled.port}/`;
    const curl = async (...args: string[]): Promise<string> =>
      (
        await run(
          'curl',
          ['-sS', '-o', '/dev/null', '-w', '%{http_code} %header{effectgate-verdict}', ...args],
          { env: agentEnv },
        )
      ).stdout.trim();
    expect(
      await curl(
        '-X',
        'POST',
        '-H',
        'content-type: application/json',
        '-d',
        '{"title":"via curl"}',
        governed,
      ),
    ).toBe('201 allow');
    expect(await curl(other)).toBe('200');
    const python = async (url: string, title?: string): Promise<string> => {
      const script = [
        'import json, sys, urllib.request',
        'data = None if len(sys.argv) < 3 else json.dumps({"title": sys.argv[2]}).encode()',
        'r = urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=data, headers={"content-type": "application/json"}), timeout=10)',
        'print(r.status, r.headers.get("effectgate-verdict") or "")',
      ].join('\n');
      return (
        await run('python3', ['-c', script, url, ...(title === undefined ? [] : [title])], { env: agentEnv })
      ).stdout.trim();
    };
    expect(await python(governed, 'via python')).toBe('201 allow');
    expect(await python(other)).toBe('200');
    // Node: NODE_EXTRA_CA_CERTS adds the gate's CA alone to its roots, enough for the governed host.
    const node = await run(
      process.execPath,
      [
        '-e',
        `const u=require('undici');u.fetch(${JSON.stringify(governed)},{method:'POST',dispatcher:new u.EnvHttpProxyAgent(),headers:{'content-type':'application/json'},body:JSON.stringify({title:'via node'})}).then(r=>console.log(r.status,r.headers.get('effectgate-verdict')))`,
      ],
      { env: agentEnv, cwd: REPO },
    );
    expect(node.stdout.trim()).toBe('201 allow');
    expect(tunnelled.requests).toHaveLength(2);
    expect(upstream.requests.map((r) => JSON.parse(r.body.toString()).title)).toEqual([
      'Disk full',
      'via curl',
      'via python',
      'via node',
    ]);
  });
});
