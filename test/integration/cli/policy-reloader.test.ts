/**
 * `effectgate proxy`'s policy reloader against a real gate on a real store (PGlite always,
 * PostgreSQL with DATABASE_URL), a real policies folder and a real loopback destination: an
 * invalid set is refused with `file:line:column` and the previous set keeps serving (duplicates
 * still recognised), an egress change is refused naming its file, a watched folder reloads on its
 * own, and each reload is counted in the Prometheus metrics.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPrometheusMetrics, type PrometheusMetrics } from '../../../src/admin/index.js';
import { createLogger } from '../../../src/cli/logger.js';
import { PolicyReloader } from '../../../src/cli/policy-reloader.js';
import { createGate, type Gate } from '../../../src/engine/index.js';
import type { GateRequest } from '../../../src/engine/types.js';
import { loadPolicies } from '../../../src/policy/index.js';
import { createUpstreamClient, type UpstreamClient } from '../../../src/proxy/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { reply, startUpstream, type Upstream } from '../../helpers/upstream.js';

function tool(id: string, path: string): string {
  return `  - id: ${id}
    match: { hosts: [127.0.0.1], method: POST, path: "${path}" }
    effect: create
    dedupe: { key: [$.body.name], window: 1h, wait: 0s }
`;
}

const scope = { tenant: 'acme', area: 'reloader', agent: 'bot' };

function post(upstream: Upstream, path: string, name: string, run: string): GateRequest {
  return {
    scheme: 'http',
    method: 'POST',
    host: '127.0.0.1',
    port: upstream.port,
    path,
    query: '',
    headers: { 'content-type': 'application/json' },
    body: new TextEncoder().encode(JSON.stringify({ name })),
    context: { run, step: null, operation: null, worker: null, agentVersion: null, retryReason: null },
  };
}

async function until(what: string, ok: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

async function reloads(metrics: PrometheusMetrics): Promise<Record<string, number>> {
  const { text } = await metrics.scrape();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^effectgate_policy_reloads_total\{result="(\w+)"\} (\d+)$/gm))
    out[m[1]!] = Number(m[2]);
  const generation = /^effectgate_policy_generation (\d+)$/m.exec(text);
  if (generation !== null) out['generation'] = Number(generation[1]);
  return out;
}

for (const target of storeTargets()) {
  describe(`policy reloader (${target.name})`, () => {
    let store: TestStore;
    let upstream: Upstream;
    let client: UpstreamClient;
    let gate: Gate;
    let dir: string;
    let metrics: PrometheusMetrics;
    let reloader: PolicyReloader;
    const lines: Record<string, unknown>[] = [];

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'effectgate-reload-'));
      writeFileSync(join(dir, 'tools.yaml'), `version: 1\ntools:\n${tool('t.items', '/items')}`);
      store = await openTestStore(target);
      upstream = await startUpstream(reply(201, { id: 1 }));
      client = createUpstreamClient();
      metrics = createPrometheusMetrics({ store, processMetrics: false });
      gate = await createGate({ policies: await loadPolicies(dir), store, scope, metrics });
      metrics.showGeneration(() => gate.generation.generation);
      const logger = createLogger({
        level: 'info',
        destination: {
          write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>),
        },
      });
      reloader = new PolicyReloader({ path: dir, gate, logger, metrics, watch: false });
      await reloader.start();
    });
    afterAll(async () => {
      reloader?.close();
      await gate?.close();
      await client?.close();
      await upstream?.close();
      await store?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it('refuses an invalid set with file:line:column and keeps serving the previous one', async () => {
      expect((await gate.handle(post(upstream, '/items', 'kept', 'r1'), client.send)).status).toBe(201);
      const bad = join(dir, 'zz-bad.yaml');
      writeFileSync(
        bad,
        `version: 1\ntools:\n  - id: t.broken\n    match: { hosts: [127.0.0.1], method: POST, path: /b }\n    effect: teleport\n`,
      );
      const outcome = await reloader.reload('test');
      expect(outcome.result).toBe('refused');
      const refused = lines.find((l) => l['msg'] === 'policies not reloaded, the previous set keeps serving');
      expect(refused?.['level']).toBe('error');
      expect(String(refused?.['issues'])).toMatch(new RegExp(`${bad}:5:\\d+: .*effect`));
      expect(gate.generation.generation).toBe(1);
      // The previous set still governs: the same effect again is its duplicate.
      const dup = await gate.handle(post(upstream, '/items', 'kept', 'r2'), client.send);
      expect(dup.status).toBe(409);
      expect(await reloads(metrics)).toMatchObject({ applied: 0, refused: 1, generation: 1 });
      rmSync(bad);
    });

    it('refuses a set that changes egress, naming the file, and applies nothing of it', async () => {
      writeFileSync(
        join(dir, 'tools.yaml'),
        `version: 1\negress: { deny: [link_local, gate, private] }\ntools:\n${tool('t.items', '/items')}${tool('t.egress', '/egress')}`,
      );
      const outcome = await reloader.reload('test');
      expect(outcome.result).toBe('refused');
      expect(outcome.result === 'refused' && outcome.message).toMatch(
        new RegExp(`egress in ${join(dir, 'tools.yaml')} changed .*restart effectgate proxy`),
      );
      expect(gate.policies.tools.map((t) => t.id)).toEqual(['t.items']);
      expect(await reloads(metrics)).toMatchObject({ applied: 0, refused: 2 });
    });

    it('applies a valid set and logs its generation and digest', async () => {
      writeFileSync(
        join(dir, 'tools.yaml'),
        `version: 1\ntools:\n${tool('t.items', '/items')}${tool('t.added', '/added')}`,
      );
      const outcome = await reloader.reload('test');
      expect(outcome.result).toBe('applied');
      const applied = lines.find((l) => l['msg'] === 'policies reloaded');
      expect(applied).toMatchObject({ level: 'info', tools: 2, generation: 2, trigger: 'test' });
      expect(String(applied?.['digest'])).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect((await gate.handle(post(upstream, '/added', 'new', 'r3'), client.send)).status).toBe(201);
      expect((await gate.handle(post(upstream, '/added', 'new', 'r4'), client.send)).status).toBe(409);
      expect(await reloads(metrics)).toMatchObject({ applied: 1, refused: 2, generation: 2 });
    });

    it('with watch, reloads a changed folder on its own, once per burst of writes', async () => {
      const watching = new PolicyReloader({
        path: dir,
        gate,
        logger: createLogger({ level: 'silent' }),
        metrics,
        watch: true,
        debounceMs: 100,
      });
      await watching.start();
      try {
        const before = gate.generation.generation;
        // An editor's save: several writes in a row, one reload.
        for (let i = 0; i < 3; i++) {
          writeFileSync(
            join(dir, 'tools.yaml'),
            `version: 1\ntools:\n${tool('t.items', '/items')}${tool('t.watched', '/watched')}# ${i}\n`,
          );
        }
        await until('the watched change applied', () =>
          gate.policies.tools.some((t) => t.id === 't.watched'),
        );
        await sleep(400);
        expect(gate.generation.generation).toBe(before + 1);
        expect(gate.route(post(upstream, '/watched', 'w', 'r5')).kind).toBe('govern');
      } finally {
        watching.close();
      }
    });
  });
}
