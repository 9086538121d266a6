/**
 * A graceful stop lets a governed call in flight finish (a clean stop must not leave an attempt
 * without an outcome): SIGTERM while the destination is still working, and the agent still gets the
 * destination's answer, the attempt its outcome, the process exit 0.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ProxyAgent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import { startProxyProcess } from '../helpers/proxy-process.js';
import { delay, reply, startUpstream, type Upstream } from '../helpers/upstream.js';

const POLICIES = fileURLToPath(new URL('../fixtures/e2e-policies/', import.meta.url));

describe('effectgate proxy graceful stop', () => {
  let upstream: Upstream;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'effectgate-stop-'));
    upstream = await startUpstream(delay(1_000, reply(201, { html_url: 'https://example.test/issues/1' })));
  });

  afterAll(async () => {
    await upstream?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('SIGTERM while a governed call is at the destination: the agent gets its 201, the trail its outcome', async () => {
    const store = `pglite:${join(dir, 'store')}`;
    const proxy = await startProxyProcess([
      '--policies',
      POLICIES,
      '--store',
      store,
      '--drain-timeout',
      '5s',
    ]);
    const agent = new ProxyAgent({ uri: proxy.url, proxyTunnel: false });
    try {
      const call = request(`${upstream.url}/repos/acme/api/issues`, {
        dispatcher: agent,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ title: 'In flight at SIGTERM' }),
      });
      while (upstream.requests.length === 0) await new Promise((r) => setTimeout(r, 20));
      const exited = proxy.stop('SIGTERM');
      const res = await call;
      expect(res.statusCode).toBe(201);
      expect(res.headers['effectgate-verdict']).toBe('allow');
      await res.body.dump();
      expect(await exited).toBe(0);
    } finally {
      await agent.close();
      await proxy.stop();
    }
    const reopened = await openStore({ url: store });
    try {
      const [op] = await reopened.listOperations({ toolId: 'test.create_issue' });
      expect(op?.state).toBe('succeeded');
      expect(op?.attempts.map((a) => a.dispatchState)).toEqual(['response_received']);
    } finally {
      await reopened.close();
    }
  }, 60_000);
});
