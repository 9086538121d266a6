/**
 * Shadow mode end to end: the built `effectgate proxy --mode shadow` on a real
 * store, real clients (curl and Python urllib through the proxy), a real loopback issue tracker.
 * Nothing is refused: the tracker holds every issue the agent asked for, and the trail, the CLI,
 * `/metrics` and the operations page all say what enforce mode would have prevented. The same
 * store under `--mode enforce` then recognises the effect made in shadow: a 409, nothing sent.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminCall } from '../helpers/admin-call.js';
import { ADMIN_TOKEN, type GateUnderTest, startGateUnderTest } from '../helpers/gate-under-test.js';
import { type IssueTracker, startIssueTracker } from '../helpers/issue-tracker.js';
import { storeTargets } from '../helpers/store.js';

const POLICIES = new URL('../fixtures/unknown-policies/', import.meta.url).pathname;
const HELD = '/held/acme/api/issues';
const execFileP = promisify(execFile);

/** A clean environment for the clients: no proxy bypass, no CA overrides from this machine. */
function clientEnv(proxyUrl: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env['PATH'] ?? '/usr/bin:/bin' };
  env['http_proxy'] = proxyUrl;
  env['HTTP_PROXY'] = proxyUrl;
  return env;
}

async function curl(
  proxyUrl: string,
  url: string,
  body: unknown,
): Promise<{ status: number; headers: string }> {
  const { stdout } = await execFileP(
    'curl',
    [
      '-sS',
      '-D',
      '-',
      '-o',
      '/dev/null',
      '-H',
      'content-type: application/json',
      '--data-binary',
      JSON.stringify(body),
      url,
    ],
    { env: clientEnv(proxyUrl) },
  );
  const status = Number(/^HTTP\/1\.1 (\d{3})/m.exec(stdout)?.[1]);
  return { status, headers: stdout.toLowerCase() };
}

async function python(proxyUrl: string, url: string, body: unknown): Promise<string> {
  const script = [
    'import json, sys, urllib.request, urllib.error',
    'req = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), headers={"content-type": "application/json"})',
    'try:',
    '    r = urllib.request.urlopen(req)',
    '    print(r.status, r.headers.get("effectgate-verdict"))',
    'except urllib.error.HTTPError as e:',
    '    print(e.code, e.headers.get("effectgate-verdict"))',
  ].join('\n');
  const { stdout } = await execFileP('python3', ['-c', script, url, JSON.stringify(body)], {
    env: clientEnv(proxyUrl),
  });
  return stdout.trim();
}

for (const target of storeTargets()) {
  describe(`shadow mode, end to end (${target.name})`, () => {
    let tracker: IssueTracker;
    let gate: GateUnderTest;

    beforeAll(async () => {
      tracker = await startIssueTracker();
      gate = await startGateUnderTest(target, POLICIES, { extraArgs: ['--mode', 'shadow'] });
    });

    afterAll(async () => {
      await gate?.close();
      await tracker?.close();
    });

    it('curl and Python repeat an effect: both reach the destination, the trail says what enforce mode would have done', async () => {
      const body = { title: 'Disk full on db-1' };
      const first = await curl(gate.proxy.url, `${tracker.url}${HELD}`, body);
      expect(first.status).toBe(201);
      expect(first.headers).toContain('effectgate-verdict: allow');
      expect(first.headers).toContain('effectgate-mode: shadow');
      const second = await curl(gate.proxy.url, `${tracker.url}${HELD}`, body);
      expect(second.status).toBe(201);
      expect(second.headers).toContain('effectgate-verdict: would_duplicate');
      expect(await python(gate.proxy.url, `${tracker.url}${HELD}`, body)).toBe('201 would_duplicate');

      // The destination's own ledger: three issues, none carrying a key the gate chose.
      expect(tracker.issues(HELD)).toHaveLength(3);
      expect(tracker.posts(HELD).map((p) => p.headers['idempotency-key'])).toEqual([
        undefined,
        undefined,
        undefined,
      ]);

      const operationId = /effectgate-operation: (\S+)/.exec(first.headers)?.[1];
      expect(operationId).toBeDefined();
      const trail = await gate.cli(['trail', operationId!]);
      expect(trail.code).toBe(0);
      expect(trail.stdout).toContain('would_duplicate');
      // The CLI wraps long lines under the time column: read it as one text.
      const text = trail.stdout.replace(/\s*\n\s+/g, ' ');
      expect(
        text.match(/shadow mode: enforce mode would have skipped it as a duplicate; sent anyway, HTTP 201/g),
      ).toHaveLength(2);
    });

    it('/metrics and the operations page count what would have been prevented', async () => {
      const port = Number(new URL(gate.proxy.adminUrl!).port);
      const metrics = await adminCall(port, ADMIN_TOKEN, 'GET', '/metrics');
      expect(metrics.text).toMatch(
        /effectgate_decisions_total\{verdict="would_duplicate",tool="test\.held_issue"\} 2/,
      );
      const page = await adminCall(port, ADMIN_TOKEN, 'GET', '/ui/operations');
      expect(page.status).toBe(200);
      expect(page.text).toContain('id="shadow-summary"');
      expect(page.text).toMatch(/<b>2<\/b> duplicate effects would have been skipped/);
    });

    it('the same store in enforce mode recognises the effect made in shadow: 409, nothing sent', async () => {
      await gate.stop();
      const enforcing = await startGateUnderTest(target, POLICIES, { storeUrl: gate.storeUrl });
      try {
        const res = await curl(enforcing.proxy.url, `${tracker.url}${HELD}`, { title: 'Disk full on db-1' });
        expect(res.status).toBe(409);
        expect(res.headers).toContain('effectgate-verdict: duplicate');
        expect(tracker.issues(HELD)).toHaveLength(3);
      } finally {
        await enforcing.close();
      }
    });
  });
}
