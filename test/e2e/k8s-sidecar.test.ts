/**
 * The gate run the way deploy/k8s/ runs it, as far as a machine without a cluster can: the built
 * CLI started with the sidecar container's exact args, after the migration Job's own args, with
 * what Kubernetes would mount swapped for temporary files (a freshly `ca init`-ed CA for the
 * Secret, the ConfigMap's policy written out) and DATABASE_URL for the Secret. Only the ports
 * (free ones) and the governed host (a local TLS destination instead of api.github.com, trusted
 * through --upstream-ca) change: the point is that those args start a gate that is ready and
 * intercepts the ConfigMap's tool over HTTPS.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
const job = manifest('migrate-job.yaml')['spec']['template']['spec']['containers'][0] as Obj;
const policies = manifest('policies-configmap.yaml')['data'] as Record<string, string>;

/** Where the pod spec mounts `volume` in the gate container. */
const mountPath = (volume: string): string =>
  (gate['volumeMounts'] as Obj[]).find((m) => m['name'] === volume)!['mountPath'];

describe('the k8s sidecar args, run as the built CLI', () => {
  let dir: string;
  let upstream: Upstream;
  let proxy: ProxyProcess;
  const token = 'k8s-sidecar-test-token-0123456789';
  const upstreamCert = selfSignedCert();

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'effectgate-e2e-k8s-'));
    upstream = await startUpstream(reply(201, { html_url: 'https://issues.example.test/7' }), {
      tls: upstreamCert,
    });
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
    const swaps: Record<string, string> = {
      [mountPath('policies')]: join(dir, 'policies'),
      [mountPath('ca')]: join(dir, 'ca'),
    };
    const args = (gate['args'] as string[]).slice(1).map((arg) => {
      if (arg.startsWith('--listen=') || arg.startsWith('--admin='))
        return arg.replace(/=.*/, '=127.0.0.1:0');
      const [flag, value] = arg.split('=');
      return value !== undefined && swaps[value] !== undefined ? `${flag}=${swaps[value]}` : arg;
    });
    expect(args).toContain('--no-migrate');
    expect(args).toContain(`--ca-dir=${join(dir, 'ca')}`);
    proxy = await startProxyProcess(
      [
        ...args,
        // The local destination's port and self-signed root: what api.github.com:443 needs not.
        `--allow-connect-ports=${upstream.port}`,
        `--upstream-ca=${join(dir, 'upstream.pem')}`,
      ],
      env,
    );
  }, 120_000);

  afterAll(async () => {
    await proxy?.stop();
    await upstream?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('answers the probes the pod spec names', async () => {
    for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) {
      const res = await fetch(`${proxy.adminUrl}${gate[probe]['httpGet']['path']}`);
      expect(res.status, probe).toBe(200);
    }
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
});
