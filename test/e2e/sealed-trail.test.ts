/**
 * The sealed trail as an operator meets it, with the built CLI: the proxy seals what it records
 * (on an embedded store with the key it makes beside it; on PostgreSQL with the key file
 * `keys audit` made, and without one it warns once), `audit checkpoint` prints the signed
 * checkpoint a witness keeps, and `audit verify --witness` holds the store to it.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProxyAgent, request } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli, startProxyProcess } from '../helpers/proxy-process.js';
import { openTestStore, storeTargets, type TestStore } from '../helpers/store.js';
import { reply, startUpstream } from '../helpers/upstream.js';

const POLICIES = new URL('../fixtures/e2e-policies/', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'effectgate-sealed-e2e-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
/** No key from the environment: each test says which key the gate has. */
const noAuditKey = { EFFECTGATE_AUDIT_KEY_FILE: '' };

let calls = 0;

/** Starts the proxy with `args`, makes one new governed call through it, stops it; its stderr. */
async function oneCall(args: readonly string[]): Promise<string> {
  const upstream = await startUpstream(reply(201, { html_url: 'https://issues.example.test/1' }));
  const proxy = await startProxyProcess(['--policies', POLICIES, '--tenant', 'acme', ...args], noAuditKey);
  const agent = new ProxyAgent({ uri: proxy.url, proxyTunnel: false });
  try {
    const res = await request(`${upstream.url}/repos/acme/api/issues`, {
      method: 'POST',
      dispatcher: agent,
      headers: { 'content-type': 'application/json', 'effectgate-run': 'run-sealed' },
      body: JSON.stringify({ title: `Sealed ${++calls}`, trace_id: `t-${calls}` }),
    });
    await res.body.text();
    expect(res.headers['effectgate-verdict']).toBe('allow');
  } finally {
    await agent.close();
    expect(await proxy.stop()).toBe(0);
    await upstream.close();
  }
  return proxy.stderr();
}

/** `audit checkpoint` kept in a file, then `audit verify --witness` with it: both pass. */
async function keepAndVerify(storeUrl: string, keyArgs: readonly string[], name: string): Promise<string> {
  const cp = await runCli(['audit', 'checkpoint', '--store', storeUrl], noAuditKey);
  expect(cp.code, cp.stderr).toBe(0);
  expect(cp.stdout).toMatch(/^effectgate\/audit\/\S+\n\d+\n\S+\n/);
  const kept = join(dir, `${name}.note`);
  writeFileSync(kept, cp.stdout);
  const verify = await runCli(
    ['audit', 'verify', '--store', storeUrl, ...keyArgs, '--witness', kept],
    noAuditKey,
  );
  expect(verify.code, verify.stdout + verify.stderr).toBe(0);
  expect(verify.stdout).toContain('audit chain intact');
  expect(verify.stdout).toMatch(/signatures checked against effectgate-audit-/);
  expect(verify.stdout).toMatch(/\n\d+ events not sealed yet/);
  expect(verify.stdout).toContain(`${kept}: ok (checkpoint of size`);
  return verify.stdout;
}

describe('the sealed trail, with the CLI', { timeout: 120_000 }, () => {
  it('on an embedded store: sealed with the key made beside it; the witness checks out', async () => {
    const store = join(dir, 'store');
    await oneCall(['--store', `pglite:${store}`]);
    expect(statSync(`${store}.keys/audit.key`).mode & 0o777).toBe(0o600);
    await keepAndVerify(`pglite:${store}`, [], 'embedded');
  });

  for (const target of storeTargets().filter((t) => t.kind === 'postgres')) {
    it('on PostgreSQL: no key, one warning and no checkpoint; with keys audit, sealed and witnessed', async () => {
      let pg: TestStore | null = null;
      try {
        pg = await openTestStore(target);
        const unsealed = await oneCall(['--store', pg.url]);
        expect(unsealed.match(/no audit key/g)).toHaveLength(1);
        const none = await runCli(['audit', 'checkpoint', '--store', pg.url], noAuditKey);
        expect(none.code).toBe(1);
        expect(none.stderr).toContain('no checkpoint yet');

        const file = join(dir, 'pg-audit.key');
        const made = await runCli(['keys', 'audit', '--out', file]);
        expect(made.code, made.stderr).toBe(0);
        expect(made.stdout).toBe(readFileSync(`${file}.pub`, 'utf8'));
        const sealed = await oneCall(['--store', pg.url, '--audit-key-file', file]);
        expect(sealed).not.toContain('no audit key');
        await keepAndVerify(pg.url, ['--audit-key-file', `${file}.pub`], 'postgres');
      } finally {
        await pg?.close();
      }
    });
  }
});
