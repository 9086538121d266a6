/**
 * The README, read top to bottom and pasted: its Quickstart's `npm start` (the
 * package.json script, as npm runs it), the example destination, the agent's curl and Python
 * lines, and the inspection commands, each taken from the README's own code blocks and run as a
 * shell runs them, against the built CLI, from a fresh directory holding only `policies/`. Two
 * changes, and only these: the proxy's and admin's ports are free ones (8080 and 8081 may be in
 * use on this machine), and `npx effectgate` is the repository's bin (npx would look it up in the
 * fresh directory). The fake tracker keeps 9090: policies/example-tracker.yaml names it.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const REPO = new URL('../../', import.meta.url).pathname;
const BIN = join(REPO, 'bin/effectgate.js');
const README = readFileSync(join(REPO, 'README.md'), 'utf8');
const execFileP = promisify(execFile);

/** The text of the `## title` section, up to the next `## `. */
function section(title: string): string {
  const start = README.indexOf(`\n## ${title}\n`);
  if (start === -1) throw new Error(`README has no section "## ${title}"`);
  const end = README.indexOf('\n## ', start + 1);
  return README.slice(start, end === -1 ? undefined : end);
}

/** The ```sh blocks of a section, in order. */
function shellBlocks(text: string): string[] {
  return [...text.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

interface Started {
  readonly child: ChildProcess;
  out(): string;
}

/** Runs `command` with bash in `cwd`, resolving once its output matches `ready`. */
function startShell(
  command: string,
  cwd: string,
  ready: RegExp,
  extraEnv: NodeJS.ProcessEnv = {},
): Promise<Started> {
  // As on a newcomer's machine: no DATABASE_URL (the suite's would make npm start use that shared
  // database instead of the embedded store the README describes).
  const { DATABASE_URL: _, ...env } = process.env;
  const child = spawn('bash', ['-c', `exec ${command}`], {
    cwd,
    env: { ...env, EFFECTGATE_LOG_LEVEL: 'warn', ...extraEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${command}: not ready in 60s\n${out}\n${err}`)), 60_000);
    const check = (): void => {
      if (ready.test(out)) {
        clearTimeout(timer);
        resolve({ child, out: () => out });
      }
    };
    child.stdout?.on('data', check);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${command} exited ${code}\n${out}\n${err}`));
    });
  });
}

async function stop(started: Started | undefined): Promise<void> {
  const child = started?.child;
  if (child === undefined || child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

describe('the README, pasted', () => {
  let dir: string;
  let proxyPort: number;
  let adminPort: number;
  let proxy: Started | undefined;
  let tracker: Started | undefined;
  const pasted = (block: string): string =>
    block
      .replaceAll('127.0.0.1:8080', `127.0.0.1:${proxyPort}`)
      .replaceAll('127.0.0.1:8081', `127.0.0.1:${adminPort}`)
      .replaceAll('npx effectgate', `node ${BIN}`);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'effectgate-readme-'));
    symlinkSync(join(REPO, 'policies'), join(dir, 'policies'));
    proxyPort = await freePort();
    adminPort = await freePort();
  });

  afterAll(async () => {
    await stop(tracker);
    await stop(proxy);
    rmSync(dir, { recursive: true, force: true });
  });

  it('Quickstart: npm start runs the proxy with policies/ and prints where the timeline pages are, with a token', async () => {
    const [quickstart] = shellBlocks(section('Quickstart'));
    expect(quickstart).toMatch(/^npm ci && npm start /m);
    const script = (
      JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { scripts: { start: string } }
    ).scripts.start;
    expect(script).toContain('--listen 127.0.0.1:8080 --admin 127.0.0.1:8081 --policies policies/');
    proxy = await startShell(
      pasted(script.replace('node bin/effectgate.js', 'npx effectgate')),
      dir,
      /admin token for this run: \S+/,
    );
    expect(proxy.out()).toContain(`timeline pages: http://127.0.0.1:${adminPort}/ui/`);
  }, 90_000);

  it('Point an agent at it: the same call twice is one effect at the destination and a 409 from the gate', async () => {
    const [trackerBlock, agentBlock, seeBlock] = shellBlocks(section('Point an agent at it'));
    expect(trackerBlock!.trim()).toBe('npx effectgate demo --api-only');
    tracker = await startShell(pasted(trackerBlock!.trim()), dir, /example issue tracker listening on/);

    // In a shell whose no_proxy covers 127.0.0.1 (common in images), as the README warns: the
    // block clears it, so the calls still go through the gate.
    const { DATABASE_URL: _, ...env } = process.env;
    const { stdout } = await execFileP('bash', ['-c', pasted(agentBlock!)], {
      cwd: dir,
      env: { ...env, no_proxy: 'localhost,127.0.0.1', NO_PROXY: 'localhost,127.0.0.1' },
    });
    const [first, second, python] = stdout.trim().split('\n');
    expect(JSON.parse(first!), stdout).toMatchObject({ number: 1, title: 'Disk full on db-1' });
    const duplicate = JSON.parse(second!) as Record<string, unknown>;
    expect(duplicate).toMatchObject({
      status: 409,
      verdict: 'duplicate',
      tool: 'example.create_issue',
      operation_state: 'succeeded',
    });
    expect(python).toBe('409 duplicate');
    // The destination's own ledger: one issue created, once.
    expect(tracker.out().match(/created issue/g)).toHaveLength(1);
    expect(tracker.out()).toContain(`Idempotency-Key ${String(duplicate['operation_id'])}: created issue #1`);

    // The inspection commands, as pasted, reach the running proxy's store.
    const seen = await execFileP('bash', ['-c', pasted(seeBlock!)], { cwd: dir, env });
    expect(seen.stdout).toContain(String(duplicate['operation_id']));
    expect(seen.stdout).toMatch(/SUCCEEDED\s+tool example\.create_issue/);
    expect(seen.stdout).toContain('decision duplicate');

    // And the timeline page, with the token npm start printed.
    const token = /admin token for this run: (\S+)/.exec(proxy!.out())![1]!;
    const page = await fetch(
      `http://127.0.0.1:${adminPort}/ui/operations/${String(duplicate['operation_id'])}`,
      {
        headers: { authorization: `Bearer ${token}` },
      },
    );
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('Disk full on db-1');
  }, 90_000);
});

/**
 * "Trying shipped policies against a stand-in", then the curl, Python and Node lines of "Gating
 * curl, Python and Node agents", each block as written: the gate's CA made under a fresh HOME, the
 * demo tracker as an HTTPS stand-in for api.github.com, the proxy with the shipped policies and
 * `--resolve`, and the three clients. The ports the README calls examples (8080, 9443) are free
 * ones; `npx effectgate` is the repository's bin; the directory holds `policies/` and, for the
 * Node line's `require("undici")`, the repository's `node_modules`.
 */
describe('the README, pasted: shipped policies against a stand-in', () => {
  let dir: string;
  let home: string;
  let proxyPort: number;
  let standInPort: number;
  let standIn: Started | undefined;
  let proxy: Started | undefined;
  const pasted = (block: string): string =>
    block
      .replaceAll('127.0.0.1:8080', `127.0.0.1:${proxyPort}`)
      .replaceAll('9443', String(standInPort))
      .replaceAll('npx effectgate', `node ${BIN}`);
  const env = (): NodeJS.ProcessEnv => {
    const { DATABASE_URL: _, ...rest } = process.env;
    // A shell whose no_proxy covers loopback (common in images) changes nothing for api.github.com.
    return { ...rest, HOME: home, no_proxy: 'localhost,127.0.0.1', NO_PROXY: 'localhost,127.0.0.1' };
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'effectgate-readme-stand-in-'));
    home = join(dir, 'home');
    mkdirSync(home);
    symlinkSync(join(REPO, 'policies'), join(dir, 'policies'));
    symlinkSync(join(REPO, 'node_modules'), join(dir, 'node_modules'));
    proxyPort = await freePort();
    standInPort = await freePort();
  });

  afterAll(async () => {
    await stop(proxy);
    await stop(standIn);
    rmSync(dir, { recursive: true, force: true });
  });

  it('curl, Python urllib and Node fetch: 201 allow, then the duplicate twice; one issue at the stand-in', async () => {
    const [caInit, standInBlock, gateBlock] = shellBlocks(
      section('Trying shipped policies against a stand-in'),
    );
    await execFileP('bash', ['-c', pasted(caInit!)], { cwd: dir, env: env() });
    standIn = await startShell(
      pasted(standInBlock!.trim()),
      dir,
      /example issue tracker listening on/,
      env(),
    );
    expect(standIn.out()).toContain(`https://127.0.0.1:${standInPort} as api.github.com`);
    proxy = await startShell(pasted(gateBlock!.trim()), dir, /proxy listening on/, env());

    const [agents] = shellBlocks(section('Gating curl, Python and Node agents, with or without a sidecar'));
    // Each of the three sends its JSON as JSON (else a governed route refuses it 422).
    expect(agents!.match(/content-type"?: ?"?application\/json/g)).toHaveLength(3);
    const { stdout } = await execFileP('bash', ['-c', pasted(agents!)], { cwd: dir, env: env() });
    expect(stdout.trim().split('\n'), stdout).toEqual(['201 allow', '422 duplicate', '422 duplicate']);
    // The stand-in's own ledger: one issue, created once, under the gate's Idempotency-Key.
    expect(standIn.out().match(/created issue/g), standIn.out()).toHaveLength(1);
    expect(standIn.out()).toMatch(/Idempotency-Key [0-9a-f-]{36}: created issue #1 "Disk full"/);
  }, 120_000);
});
