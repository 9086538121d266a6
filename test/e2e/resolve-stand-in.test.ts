/**
 * `--resolve` end to end: the real `effectgate proxy` with the SHIPPED `policies/`, unedited, and
 * `--resolve api.github.com:443=127.0.0.1:<port>` sending api.github.com to a local TLS stand-in
 * (an issue tracker with its own certificate for api.github.com, trusted with `--upstream-ca`). A
 * client through the proxy, trusting the gate's CA, creates an issue on https://api.github.com:
 * governed by github.create_issue (201, then a duplicate in GitHub's dialect), the stand-in's ledger holds one issue,
 * and the trail names api.github.com, not the address dialled. On PGlite always, on PostgreSQL
 * when DATABASE_URL is set.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProxyAgent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GateUnderTest, startGateUnderTest } from '../helpers/gate-under-test.js';
import { type IssueTracker, startIssueTracker } from '../helpers/issue-tracker.js';
import { runCli } from '../helpers/proxy-process.js';
import { storeTargets } from '../helpers/store.js';
import { selfSignedCert } from '../helpers/upstream.js';

const SHIPPED_POLICIES = new URL('../../policies/', import.meta.url).pathname;
const COLLECTION = '/repos/acme/api/issues';

for (const target of storeTargets()) {
  describe(`--resolve: shipped policies against a TLS stand-in (${target.name})`, { timeout: 90_000 }, () => {
    let dir: string;
    let tracker: IssueTracker;
    let gate: GateUnderTest;
    let agent: ProxyAgent;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'effectgate-e2e-resolve-'));
      const standIn = selfSignedCert(['api.github.com']);
      const standInCa = join(dir, 'stand-in.pem');
      writeFileSync(standInCa, standIn.cert);
      tracker = await startIssueTracker({ tls: standIn });
      const init = await runCli(['ca', 'init', '--dir', join(dir, 'ca')]);
      expect(init.code, init.stderr).toBe(0);
      gate = await startGateUnderTest(target, SHIPPED_POLICIES, {
        extraArgs: [
          '--ca-dir',
          join(dir, 'ca'),
          '--upstream-ca',
          standInCa,
          '--resolve',
          `api.github.com:443=127.0.0.1:${tracker.port}`,
        ],
      });
      agent = new ProxyAgent({
        uri: gate.proxy.url,
        requestTls: { ca: readFileSync(join(dir, 'ca', 'ca.pem'), 'utf8') },
      });
    }, 180_000);

    afterAll(async () => {
      await agent?.close();
      await gate?.close();
      await tracker?.close();
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    });

    const createIssue = async (title: string) => {
      const res = await request(`https://api.github.com${COLLECTION}`, {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ title }),
      });
      const text = await res.body.text();
      return {
        status: res.statusCode,
        headers: res.headers,
        json: text ? (JSON.parse(text) as Record<string, unknown>) : {},
      };
    };

    it('governs api.github.com at the stand-in: 201, then a duplicate; one issue in its ledger', async () => {
      const first = await createIssue('Disk full on db-1');
      expect(first.status, JSON.stringify(first.json)).toBe(201);
      expect(first.headers['effectgate-verdict']).toBe('allow');
      const operation = first.headers['effectgate-operation'] as string;
      const second = await createIssue('Disk full on db-1');
      // In GitHub's own dialect, as the shipped github.yaml asks (verdict.protocol: github).
      expect(second.status).toBe(422);
      expect(second.headers['effectgate-verdict']).toBe('duplicate');
      expect(second.json).toMatchObject({
        documentation_url: 'urn:effectgate:verdict:duplicate',
        effectgate: { verdict: 'duplicate', tool: 'github.create_issue', operation_id: operation },
      });

      expect(tracker.issues(COLLECTION)).toHaveLength(1);
      const [post] = tracker.posts(COLLECTION);
      // The stand-in was asked as api.github.com, under the operation's key.
      expect(post!.headers['host']).toBe('api.github.com');
      expect(post!.headers['idempotency-key']).toBe(operation);

      const trail = await gate.trail(operation);
      expect(trail.operation).toMatchObject({ toolId: 'github.create_issue', state: 'succeeded' });
      // What was dialled is not what the trail records: the policy's host is.
      const recorded = JSON.stringify(trail);
      expect(recorded).toContain('api.github.com');
      expect(recorded).not.toContain(`127.0.0.1:${tracker.port}`);
    });
  });
}
