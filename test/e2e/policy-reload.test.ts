/**
 * Hot reload of policies end to end: the built `effectgate proxy` on an embedded
 * PGlite store in a temp folder, a temp policies folder, a real loopback destination and undici
 * through the proxy. `kill -HUP` applies a rewritten policy file; an invalid one is refused with
 * `file:line` in the log while the previous set keeps serving; with `--watch` a change applies
 * without a signal. Needs `npm run build`.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ProxyAgent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ProxyProcess, startProxyProcess } from '../helpers/proxy-process.js';
import { reply, startUpstream, type Upstream } from '../helpers/upstream.js';

function tool(id: string, path: string): string {
  return `  - id: ${id}
    match: { hosts: [127.0.0.1], method: POST, path: "${path}" }
    effect: create
    dedupe: { key: [$.body.name], window: 1h, wait: 0s }
`;
}

function policyFile(...tools: string[]): string {
  return `version: 1\ntools:\n${tools.join('')}`;
}

async function until(what: string, ok: () => boolean, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** The log lines (JSON) with this message, in order. */
function logged(proxy: ProxyProcess, msg: string): Record<string, unknown>[] {
  return proxy
    .stderr()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l['msg'] === msg);
}

interface Started {
  readonly proxy: ProxyProcess;
  readonly agent: ProxyAgent;
  readonly policies: string;
}

async function start(dir: string, name: string, extra: readonly string[]): Promise<Started> {
  const folder = mkdtempSync(join(dir, `${name}-policies-`));
  writeFileSync(join(folder, 'tools.yaml'), policyFile(tool('t.items', '/items')));
  const proxy = await startProxyProcess(
    [
      '--policies',
      folder,
      '--store',
      `pglite:${join(dir, `${name}-store`)}`,
      '--admin',
      '127.0.0.1:0',
      '--tenant',
      'acme',
      '--area',
      'reload',
      '--agent',
      'bot',
      ...extra,
    ],
    { EFFECTGATE_LOG_LEVEL: 'info' },
  );
  return { proxy, agent: new ProxyAgent({ uri: proxy.url, proxyTunnel: false }), policies: folder };
}

describe('effectgate proxy reloads its policies (built CLI, PGlite)', () => {
  let upstream: Upstream;
  let dir: string;
  let signalled: Started;
  let watched: Started;

  beforeAll(async () => {
    upstream = await startUpstream(reply(201, { id: 1 }));
    dir = mkdtempSync(join(tmpdir(), 'effectgate-e2e-reload-'));
    [signalled, watched] = await Promise.all([start(dir, 'hup', []), start(dir, 'watch', ['--watch'])]);
  });
  afterAll(async () => {
    for (const s of [signalled, watched]) {
      await s?.agent.close();
      await s?.proxy.stop();
    }
    await upstream?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function post(s: Started, path: string, name: string, run: string) {
    const res = await request(`${upstream.url}${path}`, {
      method: 'POST',
      dispatcher: s.agent,
      headers: { 'content-type': 'application/json', 'effectgate-run': run },
      body: JSON.stringify({ name }),
    });
    await res.body.dump();
    return { status: res.statusCode, verdict: res.headers['effectgate-verdict'] };
  }

  async function generation(s: Started): Promise<number> {
    const res = await request(`${s.proxy.adminUrl}/metrics`);
    const text = await res.body.text();
    return Number(/^effectgate_policy_generation (\d+)$/m.exec(text)?.[1]);
  }

  it('applies a rewritten policy file on SIGHUP: a new tool is governed from then on', async () => {
    const s = signalled;
    expect(await post(s, '/new', 'n1', 'r1')).toEqual({ status: 201, verdict: undefined });
    expect(await generation(s)).toBe(1);
    writeFileSync(
      join(s.policies, 'tools.yaml'),
      policyFile(tool('t.items', '/items'), tool('t.new', '/new')),
    );
    s.proxy.child.kill('SIGHUP');
    await until('policies reloaded', () => logged(s.proxy, 'policies reloaded').length === 1);
    expect(logged(s.proxy, 'policies reloaded')[0]).toMatchObject({
      tools: 2,
      generation: 2,
      trigger: 'SIGHUP',
    });
    expect(await generation(s)).toBe(2);
    expect(await post(s, '/new', 'n2', 'r2')).toEqual({ status: 201, verdict: 'allow' });
    expect(await post(s, '/new', 'n2', 'r3')).toEqual({ status: 409, verdict: 'duplicate' });
  });

  it('refuses an invalid file on SIGHUP with file:line in the log; the previous set keeps serving', async () => {
    const s = signalled;
    const bad = join(s.policies, 'zz-bad.yaml');
    writeFileSync(
      bad,
      'version: 1\ntools:\n  - id: t.bad\n    effect: create\n    dedupe: { key: [$.body.x] }\n',
    );
    s.proxy.child.kill('SIGHUP');
    const refusal = 'policies not reloaded, the previous set keeps serving';
    await until('the refusal logged', () => logged(s.proxy, refusal).length === 1);
    const line = logged(s.proxy, refusal)[0]!;
    expect(line['level']).toBe('error');
    expect(String(line['issues'])).toMatch(new RegExp(`${bad}:\\d+:\\d+: `));
    expect(s.proxy.child.exitCode).toBeNull();
    expect(await generation(s)).toBe(2);
    // Generation 2 still governs: the same effect again is still its duplicate.
    expect(await post(s, '/new', 'n2', 'r4')).toEqual({ status: 409, verdict: 'duplicate' });
    const metrics = await (await request(`${s.proxy.adminUrl}/metrics`)).body.text();
    expect(metrics).toMatch(/^effectgate_policy_reloads_total\{result="refused"\} 1$/m);
    expect(metrics).toMatch(/^effectgate_policy_reloads_total\{result="applied"\} 1$/m);
  });

  it('with --watch, applies a changed file without a signal', async () => {
    const s = watched;
    expect(await post(s, '/watched', 'w1', 'r1')).toEqual({ status: 201, verdict: undefined });
    writeFileSync(
      join(s.policies, 'tools.yaml'),
      policyFile(tool('t.items', '/items'), tool('t.watched', '/watched')),
    );
    await until('policies reloaded', () => logged(s.proxy, 'policies reloaded').length >= 1);
    expect(logged(s.proxy, 'policies reloaded')[0]).toMatchObject({ tools: 2, trigger: 'watch' });
    expect(await post(s, '/watched', 'w2', 'r2')).toEqual({ status: 201, verdict: 'allow' });
    expect(await post(s, '/watched', 'w2', 'r3')).toEqual({ status: 409, verdict: 'duplicate' });
  });
});
