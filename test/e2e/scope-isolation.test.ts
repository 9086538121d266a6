/**
 * Scope is always part of the key (docs/design.md §2 "Scope is always in the
 * key"): two sidecars of different tenants on ONE store, proposing the identical effect,
 * both get it done; the same tenant again gets a duplicate. On PostgreSQL both gates run at once;
 * PGlite is single-process, so there they take turns on the same directory.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProxyAgent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { startProxyProcess } from '../helpers/proxy-process.js';
import { openTestStore, storeTargets, type TestStore } from '../helpers/store.js';
import { reply, startUpstream, type Upstream } from '../helpers/upstream.js';

const POLICIES = new URL('../fixtures/e2e-policies/', import.meta.url).pathname;

async function propose(upstream: Upstream, proxyUrl: string, run: string): Promise<string | undefined> {
  const agent = new ProxyAgent({ uri: proxyUrl, proxyTunnel: false });
  try {
    const res = await request(`${upstream.url}/repos/acme/api/issues`, {
      method: 'POST',
      dispatcher: agent,
      headers: { 'content-type': 'application/json', 'effectgate-run': run },
      body: JSON.stringify({ title: 'Rotate the leaked key' }),
    });
    await res.body.text();
    return res.headers['effectgate-verdict'] as string | undefined;
  } finally {
    await agent.close();
  }
}

for (const target of storeTargets()) {
  describe(`scope isolation through the proxy (${target.name})`, () => {
    it("never makes tenant B's identical call a duplicate of tenant A's effect", async () => {
      const upstream = await startUpstream(reply(201, { html_url: 'https://issues.example.test/9' }));
      const dir = mkdtempSync(join(tmpdir(), 'effectgate-scope-'));
      let pg: TestStore | null = null;
      try {
        let storeUrl = `pglite:${join(dir, 'store')}`;
        if (target.kind === 'postgres') {
          pg = await openTestStore(target);
          storeUrl = pg.url;
        }
        const sidecar = (tenant: string) =>
          startProxyProcess([
            '--policies',
            POLICIES,
            '--store',
            storeUrl,
            '--tenant',
            tenant,
            '--area',
            'ops',
            '--agent',
            'bot',
          ]);
        const a = await sidecar('tenant-a');
        expect(await propose(upstream, a.url, 'a-1')).toBe('allow');
        if (target.kind === 'pglite') await a.stop();
        const b = await sidecar('tenant-b');
        expect(await propose(upstream, b.url, 'b-1')).toBe('allow');
        expect(await propose(upstream, b.url, 'b-2')).toBe('duplicate');
        await b.stop();
        if (target.kind === 'postgres') {
          expect(await propose(upstream, a.url, 'a-2')).toBe('duplicate');
          await a.stop();
        }
        expect(upstream.requests).toHaveLength(2);
      } finally {
        await upstream.close();
        await pg?.close();
        rmSync(dir, { recursive: true, force: true });
      }
    }, 60_000);
  });
}
