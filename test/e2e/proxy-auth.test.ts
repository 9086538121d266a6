/**
 * Many agents, one proxy (docs/design.md §4.2), through the real binary: `--agents` maps each
 * `Proxy-Authorization` credential to a scope. No credentials or wrong ones → 407 with
 * Proxy-Authenticate (absolute-form and CONNECT); curl with `-x http://id:secret@…` is governed
 * in its agent's scope; another agent's identical call is a different scope; Bearer works; the
 * upstream never sees the credential; the trail records the authenticated scope.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ProxyAgent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import { type ProxyProcess, runCli, startProxyProcess } from '../helpers/proxy-process.js';
import {
  type RecordedRequest,
  reply,
  selfSignedCert,
  startUpstream,
  type Upstream,
} from '../helpers/upstream.js';

const run = promisify(execFile);
const POLICIES = new URL('../fixtures/e2e-policies/', import.meta.url).pathname;
const AGENTS = new URL('../fixtures/agents/agents.yaml', import.meta.url).pathname;

describe('effectgate proxy --agents (shared proxy, one scope per credential)', () => {
  let dir: string;
  let storeUrl: string;
  let upstream: Upstream;
  let proxy: ProxyProcess;
  const agents: ProxyAgent[] = [];

  const dispatcher = (options: ConstructorParameters<typeof ProxyAgent>[0]): ProxyAgent => {
    const a = new ProxyAgent(options);
    agents.push(a);
    return a;
  };
  const withCreds = (id: string, secret: string): string => `http://${id}:${secret}@127.0.0.1:${proxy.port}`;
  const issuesTitled = (title: string): RecordedRequest[] =>
    upstream.requests.filter((r) => r.body.toString().includes(`"${title}"`));
  const issueUrl = (): string => `${upstream.url}/repos/acme/api/issues`;
  const post = (d: ProxyAgent, title: string) =>
    request(issueUrl(), {
      dispatcher: d,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ title }),
    });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'effectgate-agents-'));
    storeUrl = `pglite:${join(dir, 'store')}`;
    upstream = await startUpstream(reply(201, { html_url: 'https://issues.example.test/1' }));
    proxy = await startProxyProcess([
      '--policies',
      POLICIES,
      '--store',
      storeUrl,
      '--agents',
      AGENTS,
      '--allow-connect-ports',
      String(upstream.port),
    ]);
  }, 60_000);

  afterAll(async () => {
    await Promise.allSettled(agents.map((a) => a.close()));
    await proxy?.stop();
    await upstream?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers 407 with Proxy-Authenticate without credentials (absolute-form and CONNECT)', async () => {
    const raw = await run('curl', [
      '-s',
      '-i',
      '-x',
      proxy.url,
      '-X',
      'POST',
      '-d',
      '{"title":"anon"}',
      issueUrl(),
    ]);
    expect(raw.stdout).toMatch(/^HTTP\/1\.1 407/m);
    expect(raw.stdout).toMatch(/^proxy-authenticate: Basic realm="effectgate"/im);
    expect(raw.stdout).toMatch(/^content-type: application\/problem\+json/im);
    await expect(post(dispatcher({ uri: proxy.url, proxyTunnel: false }), 'anon')).rejects.toThrow(/\(407\)/);
    await expect(post(dispatcher(proxy.url), 'anon')).rejects.toThrow(/\(407\)/);
    expect(issuesTitled('anon')).toHaveLength(0);
  });

  it('answers 407 to a wrong secret', async () => {
    await expect(post(dispatcher(withCreds('triage-bot', 'wrong')), 'wrong')).rejects.toThrow(/\(407\)/);
    await expect(
      post(dispatcher({ uri: withCreds('triage-bot', 'billing-secret-2'), proxyTunnel: false }), 'wrong'),
    ).rejects.toThrow(/\(407\)/);
    const bearer = dispatcher({ uri: proxy.url, token: 'Bearer nope', proxyTunnel: false });
    await expect(post(bearer, 'wrong')).rejects.toThrow(/\(407\)/);
    expect(issuesTitled('wrong')).toHaveLength(0);
  });

  it('governs each agent in its own scope; the credential never reaches the upstream', async () => {
    const curl = async (): Promise<string> =>
      (
        await run('curl', [
          '-s',
          '-i',
          '-x',
          withCreds('triage-bot', 'triage-secret-1'),
          '-X',
          'POST',
          '-H',
          'content-type: application/json',
          '-H',
          'effectgate-tenant: globex',
          issueUrl(),
          '-d',
          '{"title":"Shared proxy"}',
        ])
      ).stdout;
    const first = await curl();
    expect(first).toMatch(/^HTTP\/1\.1 201/m);
    expect(first).toMatch(/^effectgate-verdict: allow/im);
    const second = await curl();
    expect(second).toMatch(/^HTTP\/1\.1 409/m);
    expect(second).toMatch(/^effectgate-verdict: duplicate/im);

    // Another agent (another tenant), through a CONNECT tunnel: the identical call is its own.
    const billing = await post(dispatcher(withCreds('billing-bot', 'billing-secret-2')), 'Shared proxy');
    expect(billing.statusCode).toBe(201);
    expect(billing.headers['effectgate-verdict']).toBe('allow');
    await billing.body.text();
    // Bearer, absolute-form: the same agent again, so a duplicate.
    const bearer = dispatcher({ uri: proxy.url, token: 'Bearer billing-secret-2', proxyTunnel: false });
    const again = await post(bearer, 'Shared proxy');
    expect(again.statusCode).toBe(409);
    expect(again.headers['effectgate-verdict']).toBe('duplicate');
    await again.body.text();

    const seen = issuesTitled('Shared proxy');
    expect(seen).toHaveLength(2);
    for (const r of seen) expect(r.headers['proxy-authorization']).toBeUndefined();
  });

  it('records the authenticated scope in the trail', async () => {
    await proxy.stop();
    const store = await openStore({ url: storeUrl, migrate: false });
    try {
      const decisions = await store.listDecisions({});
      const scopes = decisions.map((d) => `${d.scope.tenant}/${d.scope.area}/${d.scope.agent}:${d.verdict}`);
      expect(scopes.sort()).toEqual([
        'acme/support/triage-bot:allow',
        'acme/support/triage-bot:duplicate',
        'globex/billing/billing-bot:allow',
        'globex/billing/billing-bot:duplicate',
      ]);
      const allowed = decisions.filter((d) => d.verdict === 'allow');
      const ops = await Promise.all(allowed.map((d) => store.getOperation(d.operationId ?? '')));
      expect(ops.map((o) => o?.scope.tenant).sort()).toEqual(['acme', 'globex']);
      expect(new Set(ops.map((o) => o?.keyHash)).size).toBe(2);
    } finally {
      await store.close();
    }
  });
});

describe('effectgate proxy --agents: refused configurations', () => {
  it('refuses --agents with --tenant, and an invalid agents file with its line', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'effectgate-agents-bad-'));
    try {
      const both = await runCli([
        'proxy',
        '--listen',
        '127.0.0.1:0',
        '--policies',
        POLICIES,
        '--store',
        `pglite:${join(dir, 's')}`,
        '--agents',
        AGENTS,
        '--tenant',
        'x',
      ]);
      expect(both.code).not.toBe(0);
      expect(both.stderr).toMatch(/--agents cannot be combined with --tenant/);
      const bad = join(dir, 'agents.yaml');
      writeFileSync(
        bad,
        'agents:\n  - id: bot\n    secret_sha256: hunter2\n    tenant: t\n    area: a\n    agent: g\n',
      );
      const invalid = await runCli([
        'proxy',
        '--listen',
        '127.0.0.1:0',
        '--policies',
        POLICIES,
        '--store',
        `pglite:${join(dir, 's')}`,
        '--agents',
        bad,
      ]);
      expect(invalid.code).not.toBe(0);
      expect(invalid.stderr).toContain(`${bad}:3:20: agents[0].secret_sha256: must be the SHA-256`);
      expect(invalid.stderr).toContain('EG_ERR_CONFIG_INVALID');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});

describe('effectgate proxy --agents with HTTPS interception (--ca-dir)', () => {
  it('governs requests inside an intercepted tunnel in the CONNECT credential scope', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'effectgate-agents-tls-'));
    const cert = selfSignedCert();
    const upstream = await startUpstream(reply(201, { html_url: 'https://issues.example.test/2' }), {
      tls: cert,
    });
    let proxy: ProxyProcess | undefined;
    try {
      expect((await runCli(['ca', 'init', '--dir', join(dir, 'ca')])).code).toBe(0);
      writeFileSync(join(dir, 'upstream.pem'), cert.cert);
      const storeUrl = `pglite:${join(dir, 'store')}`;
      proxy = await startProxyProcess([
        '--policies',
        POLICIES,
        '--store',
        storeUrl,
        '--agents',
        AGENTS,
        '--allow-connect-ports',
        String(upstream.port),
        '--ca-dir',
        join(dir, 'ca'),
        '--upstream-ca',
        join(dir, 'upstream.pem'),
      ]);
      const curl = async (proxyUrl: string): Promise<string> => {
        const r = await run('curl', [
          '-s',
          '-i',
          '--cacert',
          join(dir, 'ca', 'ca.pem'),
          '-x',
          proxyUrl,
          '-X',
          'POST',
          '-H',
          'content-type: application/json',
          `https://127.0.0.1:${upstream.port}/repos/acme/api/issues`,
          '-d',
          '{"title":"over TLS"}',
        ]).catch((err: { stdout: string }) => err);
        return r.stdout;
      };
      const port = proxy.port;
      expect(await curl(`http://127.0.0.1:${port}`)).toMatch(/^HTTP\/1\.1 407/m);
      expect(await curl(`http://triage-bot:nope@127.0.0.1:${port}`)).toMatch(/^HTTP\/1\.1 407/m);
      const first = await curl(`http://triage-bot:triage-secret-1@127.0.0.1:${port}`);
      expect(first).toMatch(/^effectgate-verdict: allow/im);
      const second = await curl(`http://triage-bot:triage-secret-1@127.0.0.1:${port}`);
      expect(second).toMatch(/^effectgate-verdict: duplicate/im);
      const other = await curl(`http://billing-bot:billing-secret-2@127.0.0.1:${port}`);
      expect(other).toMatch(/^effectgate-verdict: allow/im);
      expect(upstream.requests).toHaveLength(2);
      for (const r of upstream.requests) expect(r.headers['proxy-authorization']).toBeUndefined();
      await proxy.stop();
      const store = await openStore({ url: storeUrl, migrate: false });
      try {
        const decisions = await store.listDecisions({});
        expect(decisions.map((d) => `${d.scope.tenant}:${d.verdict}`).sort()).toEqual([
          'acme:allow',
          'acme:duplicate',
          'globex:allow',
        ]);
      } finally {
        await store.close();
      }
    } finally {
      await proxy?.stop();
      await upstream.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
