/**
 * The run model through the real proxy binary: an agent that names its run (`Effectgate-Run`) and
 * loops is halted whether it opens a new connection per call (curl) or reuses one (undici
 * keep-alive); a client that names none gets a run derived from its scope and address, which is
 * every process behind that address and so is never halted; an unrelated client of the same
 * shared proxy is not halted by another's loop; and an operator can list and release a halted run
 * (`effectgate runs`, the admin API), which is recorded. Clients are told apart by their loopback
 * source address (127.0.0.2 ... .6), as hosts sharing a proxy would be.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type IssueTracker, startIssueTracker } from '../helpers/issue-tracker.js';
import { type ProxyProcess, runCli, startProxyProcess } from '../helpers/proxy-process.js';
import { openTestStore, storeTargets, type TestStore } from '../helpers/store.js';

const POLICIES = new URL('../fixtures/e2e-policies/', import.meta.url).pathname;
const TOKEN = 'eg-run-model-4f1d9c2b7a';
const COLLECTION = '/repos/acme/loops/issues';
const execFileP = promisify(execFile);

interface Answer {
  readonly status: number;
  readonly json: Record<string, unknown>;
}

for (const target of storeTargets()) {
  describe(`run model through the proxy (${target.name})`, () => {
    let tracker: IssueTracker;
    let proxy: ProxyProcess;
    let pgStore: TestStore | null = null;
    let storeUrl: string;
    let dir: string;
    const curlRun = 'curl-loop';
    const undiciRun = 'undici-loop';

    beforeAll(async () => {
      tracker = await startIssueTracker();
      dir = mkdtempSync(join(tmpdir(), 'effectgate-runs-'));
      if (target.kind === 'postgres') {
        pgStore = await openTestStore(target);
        storeUrl = pgStore.url;
      } else {
        storeUrl = `pglite:${join(dir, 'store')}`;
      }
      proxy = await start();
    });

    const start = (...extra: string[]): Promise<ProxyProcess> =>
      startProxyProcess(
        [
          '--policies',
          POLICIES,
          '--store',
          storeUrl,
          '--admin',
          '127.0.0.1:0',
          '--tenant',
          'acme',
          '--area',
          'support',
          '--agent',
          'shared',
          // A fixed listen address names a stable instance; with port 0 the id carries the pid,
          // and a restart would be another gate (run-identity.ts: a halt is per gate instance).
          '--instance-id',
          'run-model-gate',
          ...extra,
        ],
        { EFFECTGATE_ADMIN_TOKEN: TOKEN },
      );

    afterAll(async () => {
      await proxy?.stop();
      await tracker?.close();
      await pgStore?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    const created = (title: string): number =>
      tracker.issues(COLLECTION).filter((i) => i.title === title).length;

    /** One curl process per call: a new connection every time, from `from`. */
    async function curl(from: string, title: string, headers: readonly string[] = []): Promise<Answer> {
      const { stdout } = await execFileP('curl', [
        '-s',
        ...headers.flatMap((h) => ['-H', h]),
        '--interface',
        from,
        '-x',
        proxy.url,
        '-H',
        'content-type: application/json',
        '-w',
        '\n%{http_code}',
        '-d',
        JSON.stringify({ title }),
        `${tracker.url}${COLLECTION}`,
      ]);
      const cut = stdout.lastIndexOf('\n');
      return { status: Number(stdout.slice(cut + 1)), json: JSON.parse(stdout.slice(0, cut) || '{}') };
    }

    const named = (run: string): string[] => [`effectgate-run: ${run}`];

    it('halts a named run that loops on one effect with a new connection per call (curl)', async () => {
      const statuses: number[] = [];
      let last: Answer | undefined;
      for (let i = 0; i < 5; i++) {
        last = await curl('127.0.0.2', 'loop by curl', named(curlRun));
        statuses.push(last.status);
      }
      expect(statuses).toEqual([201, 409, 409, 409, 429]);
      expect(last!.json).toMatchObject({ verdict: 'halted', duplicate_skips: 3, run_id: curlRun });
      // Halted means halted: its next new effect is refused too, and nothing more reached the tracker.
      const fresh = await curl('127.0.0.2', 'a new effect of the looping agent', named(curlRun));
      expect(fresh.status).toBe(429);
      expect(fresh.json['detail']).toContain(`effectgate runs release ${curlRun}`);
      expect(created('loop by curl')).toBe(1);
      expect(created('a new effect of the looping agent')).toBe(0);
    });

    it('halts a named run that loops on one keep-alive connection (undici)', async () => {
      const pool = new Pool(proxy.url, { connections: 1, connect: { localAddress: '127.0.0.4' } });
      try {
        const statuses: number[] = [];
        let body: Record<string, unknown> = {};
        for (let i = 0; i < 5; i++) {
          const res = await pool.request({
            method: 'POST',
            // Absolute-form, as an HTTP proxy client sends a plain-HTTP target.
            path: `${tracker.url}${COLLECTION}`,
            headers: {
              host: new URL(tracker.url).host,
              'content-type': 'application/json',
              'effectgate-run': undiciRun,
            },
            body: JSON.stringify({ title: 'loop by undici' }),
          });
          statuses.push(res.statusCode);
          body = (await res.body.json()) as Record<string, unknown>;
        }
        expect(statuses).toEqual([201, 409, 409, 409, 429]);
        expect(body['run_id']).toBe(undiciRun);
        expect(created('loop by undici')).toBe(1);
      } finally {
        await pool.close();
      }
    });

    it('an unnamed agent is never halted; an unrelated later process with a new effect is allowed', async () => {
      const statuses: number[] = [];
      let last: Answer | undefined;
      for (let i = 0; i < 6; i++) {
        last = await curl('127.0.0.6', 'loop without a run name');
        statuses.push(last.status);
      }
      expect(statuses).toEqual([201, 409, 409, 409, 409, 409]);
      // The source is the derived run of this address, not "this agent's own run".
      expect(last!.json).toMatchObject({
        verdict: 'duplicate',
        duplicate_skips: 5,
        source: { derived_run: true, same_address: true },
      });
      expect(String(last!.json['detail'])).not.toContain('halts the run');
      // Another process on the same host (the same address, the same derived run) pays for something else.
      expect((await curl('127.0.0.6', 'another process, another payment')).status).toBe(201);
      expect(created('loop without a run name')).toBe(1);
      expect(created('another process, another payment')).toBe(1);
    });

    it('refuses a client that names a derived run (it could join another client with it)', async () => {
      const before = tracker.posts(COLLECTION).length;
      const dup = await curl('127.0.0.6', 'loop without a run name');
      const derived = String((dup.json['source'] as { run_id: string }).run_id);
      expect(derived).toMatch(/^auto-/);
      for (const title of ['hijack', 'hijack', 'hijack', 'hijack', 'hijack']) {
        const r = await curl('127.0.0.5', title, [`effectgate-run: ${derived}`]);
        expect(r.status).toBe(400);
        expect(String(r.json['detail'])).toContain('must not start with auto-');
      }
      expect(tracker.posts(COLLECTION).length).toBe(before);
    });

    it('does not halt an unrelated client of the same shared proxy, and still answers it duplicates', async () => {
      expect((await curl('127.0.0.3', 'my own effect')).status).toBe(201);
      // The looping client's effect is done: a duplicate for this client too (409, not 429).
      const dup = await curl('127.0.0.3', 'loop by curl');
      expect(dup.status).toBe(409);
      expect(dup.json).toMatchObject({ verdict: 'duplicate', duplicate_skips: 1 });
      expect(created('loop by curl')).toBe(1);
      // Its own duplicates, distinct ones, never add up to a halt.
      for (const title of ['loop by undici', 'my own effect'])
        expect((await curl('127.0.0.3', title)).status).toBe(409);
      expect((await curl('127.0.0.3', 'another effect of mine')).status).toBe(201);
    });

    it('lists the halted runs, releases one (recorded), and the released run goes on', async () => {
      const listed = await runCli(['runs', '--halted', '--json', '--store', storeUrl]);
      expect(listed.code, listed.stderr).toBe(0);
      const halted = (JSON.parse(listed.stdout) as { runs: { id: string; haltedAt: string | null }[] }).runs;
      expect(halted.map((r) => r.id).sort()).toEqual([curlRun, undiciRun].sort());

      const refused = await runCli(['runs', 'release', curlRun, '--store', storeUrl]);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain('needs --by WHO, --reason TEXT');

      const released = await runCli([
        'runs',
        'release',
        curlRun,
        '--by',
        'oncall@acme',
        '--reason',
        'prompt fixed, loop understood',
        '--store',
        storeUrl,
      ]);
      expect(released.code, released.stderr).toBe(0);
      expect(released.stdout).toContain(`released run ${curlRun}`);
      const again = await runCli([
        'runs',
        'release',
        curlRun,
        '--by',
        'x',
        '--reason',
        'y',
        '--store',
        storeUrl,
      ]);
      expect(again.code).toBe(1);
      expect(again.stderr).toContain('EG_ERR_RUN_STATE');

      // The same client and run (not idle): decided as usual again, its counts from zero.
      const next = await curl('127.0.0.2', 'after the release', named(curlRun));
      expect(next.status).toBe(201);
      const dup = await curl('127.0.0.2', 'loop by curl', named(curlRun));
      expect(dup.status).toBe(409);
      expect(dup.json).toMatchObject({ duplicate_skips: 1, source: expect.any(Object) });
      // The other halted run is untouched.
      const pool = new Pool(proxy.url, { connections: 1, connect: { localAddress: '127.0.0.4' } });
      try {
        const res = await pool.request({
          method: 'POST',
          path: `${tracker.url}${COLLECTION}`,
          headers: {
            host: new URL(tracker.url).host,
            'content-type': 'application/json',
            'effectgate-run': undiciRun,
          },
          body: JSON.stringify({ title: 'undici after the other release' }),
        });
        expect(res.statusCode).toBe(429);
        await res.body.dump();
      } finally {
        await pool.close();
      }

      // The admin API shows the run's decisions, its halt and its release.
      const api = await fetch(`${proxy.adminUrl}/api/runs/${encodeURIComponent(curlRun)}`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(api.status).toBe(200);
      const run = (await api.json()) as {
        runs: { haltedAt: string | null; releases: { releasedBy: string; haltDecisionId: string }[] }[];
        decisions: { verdict: string; id: string }[];
      };
      expect(run.runs).toHaveLength(1);
      expect(run.runs[0]!.haltedAt).toBeNull();
      expect(run.runs[0]!.releases).toMatchObject([{ releasedBy: 'oncall@acme' }]);
      const verdicts = run.decisions.map((d) => d.verdict);
      expect(verdicts.filter((v) => v === 'halted')).toHaveLength(2);
      expect(run.decisions.map((d) => d.id)).toContain(run.runs[0]!.releases[0]!.haltDecisionId);
    });

    it('keeps a halted named run halted across a restart, until it is released', async () => {
      await proxy.stop();
      proxy = await start();
      const send = async (title: string): Promise<Answer> => {
        const pool = new Pool(proxy.url, { connections: 1, connect: { localAddress: '127.0.0.4' } });
        try {
          const res = await pool.request({
            method: 'POST',
            path: `${tracker.url}${COLLECTION}`,
            headers: {
              host: new URL(tracker.url).host,
              'content-type': 'application/json',
              'effectgate-run': undiciRun,
            },
            body: JSON.stringify({ title }),
          });
          return { status: res.statusCode, json: (await res.body.json()) as Record<string, unknown> };
        } finally {
          await pool.close();
        }
      };
      // A new gate process: the run's halt is in the store and still holds.
      const after = await send('after the restart');
      expect(after.status).toBe(429);
      expect(after.json).toMatchObject({ verdict: 'halted', run_id: undiciRun });
      expect(created('after the restart')).toBe(0);

      const release = await fetch(`${proxy.adminUrl}/api/runs/${encodeURIComponent(undiciRun)}/release`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ by: 'oncall@acme', reason: 'looked at it' }),
      });
      expect(release.status).toBe(200);
      expect((await send('after its release')).status).toBe(201);

      const verify = await runCli(['audit', 'verify', '--store', storeUrl]);
      expect(verify.code, verify.stdout + verify.stderr).toBe(0);
    });
  });
}
