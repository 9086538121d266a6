/**
 * 50 concurrent proposals of one effect, each from a different run. On PostgreSQL they go through
 * TWO gate processes sharing the database (the reservation must be correct across processes); on
 * embedded PGlite (single-process) through one. Exactly one effect may reach the upstream.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProxyAgent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { type ProxyProcess, runCli, startProxyProcess } from '../helpers/proxy-process.js';
import { openTestStore, storeTargets, type TestStore } from '../helpers/store.js';
import { delay, reply, startUpstream } from '../helpers/upstream.js';

const POLICIES = new URL('../fixtures/e2e-policies/', import.meta.url).pathname;

for (const target of storeTargets()) {
  const gates = target.kind === 'postgres' ? 2 : 1;
  describe(`50 concurrent proposals through ${gates} gate process(es) (${target.name})`, () => {
    it('lets exactly one effect through; every other proposal is duplicate or pending; the chain verifies', async () => {
      const upstream = await startUpstream(
        delay(150, reply(201, { html_url: 'https://issues.example.test/1' })),
      );
      const dir = mkdtempSync(join(tmpdir(), 'effectgate-conc-'));
      let pg: TestStore | null = null;
      const proxies: ProxyProcess[] = [];
      const agents: ProxyAgent[] = [];
      try {
        let storeUrl = `pglite:${join(dir, 'store')}`;
        if (target.kind === 'postgres') {
          pg = await openTestStore(target);
          storeUrl = pg.url;
        }
        for (let i = 0; i < gates; i++) {
          proxies.push(
            await startProxyProcess(['--policies', POLICIES, '--store', storeUrl, '--tenant', 'acme']),
          );
          agents.push(new ProxyAgent({ uri: proxies[i]!.url, proxyTunnel: false, connections: 50 }));
        }
        const results = await Promise.all(
          Array.from({ length: 50 }, async (_, i) => {
            const res = await request(`${upstream.url}/repos/acme/api/issues`, {
              method: 'POST',
              dispatcher: agents[i % gates]!,
              headers: { 'content-type': 'application/json', 'effectgate-run': `run-${i}` },
              body: JSON.stringify({ title: 'The one incident', trace_id: `t-${i}` }),
            });
            const text = await res.body.text();
            return { status: res.statusCode, verdict: res.headers['effectgate-verdict'], body: text };
          }),
        );
        const effects = upstream.requests.filter((r) => r.url === '/repos/acme/api/issues');
        expect(effects).toHaveLength(1);
        const verdicts = results.map((r) => r.verdict);
        expect(verdicts.filter((v) => v === 'allow')).toHaveLength(1);
        expect(verdicts.every((v) => v === 'allow' || v === 'duplicate' || v === 'pending')).toBe(true);
        for (const r of results) expect(r.status).toBe(r.verdict === 'allow' ? 201 : 409);
        for (const p of proxies) await p.stop();
        const verify = await runCli(['audit', 'verify', '--store', storeUrl]);
        expect(verify.code, verify.stdout + verify.stderr).toBe(0);
        expect(verify.stdout).toContain('audit chain intact');
      } finally {
        await Promise.all(agents.map((a) => a.close()));
        await Promise.all(proxies.map((p) => p.stop()));
        await upstream.close();
        await pg?.close();
        rmSync(dir, { recursive: true, force: true });
      }
    }, 60_000);
  });
}
