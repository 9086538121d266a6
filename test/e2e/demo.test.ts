/**
 * `effectgate demo` as a newcomer runs it (the built bin): the walk-through prints every step's
 * answer, the fake tracker's ledger ends with exactly the effects that happened (two issues, the
 * approved retry replayed by its Idempotency-Key), and the demo's temporary directory is gone
 * afterwards; left running, its admin UI serves the printed timeline page with the printed token
 * until SIGINT stops it cleanly.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/proxy-process.js';

const BIN = fileURLToPath(new URL('../../bin/effectgate.js', import.meta.url));

/** The demo's own temporary directories go here (TMPDIR), so the test can see they are removed. */
const scratch = mkdtempSync(join(tmpdir(), 'effectgate-demo-test-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function tmpEnv(): NodeJS.ProcessEnv {
  return { TMPDIR: mkdtempSync(join(scratch, 'tmp-')) };
}

/** The demo's temporary directory, from its last line. */
function removedDir(stdout: string): string {
  const m = /effectgate demo stopped; (\S+) removed/.exec(stdout);
  expect(m, stdout).not.toBeNull();
  return m![1]!;
}

describe('effectgate demo (built CLI)', () => {
  it('--help prints its usage and exits 0', async () => {
    const r = await runCli(['demo', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('usage: effectgate demo [--no-wait] [--port PORT]');
    expect((await runCli(['--help'])).stdout).toContain('demo ');
  });

  it('--no-wait walks through allow, duplicate, lost response, hold, approval and trail, then exits 0 and removes its directory', async () => {
    const env = tmpEnv();
    const r = await runCli(['demo', '--no-wait'], env);
    const out = r.stdout;
    expect(r.code, `${out}\n${r.stderr}`).toBe(0);
    // (1) allowed, one effect.
    expect(out).toMatch(/→ 201 Created: issue #1 /);
    const op1 = /verdict allow, operation (\S+);/.exec(out)?.[1];
    expect(op1).toBeDefined();
    expect(out).toContain('fake API ledger: 1 effect(s) (issues created) from 1 POST(s)');
    // (2) the duplicate points at the first run and operation; nothing was sent.
    expect(out).toContain('→ 409 duplicate');
    expect(out).toContain(`run run-1, operation ${op1} (the one from step 1)`);
    // (3) the dropped response: the effect happened, the agent cannot know.
    expect(out).toContain('→ 502: dispatch_state sent_no_response, operation_state unknown');
    expect(out).toContain('fake API ledger: 2 effect(s) (issues created) from 2 POST(s)');
    // (4) the retry is held with an approval id.
    const approval = /→ 428 hold: nothing was sent; approval (\S+) was requested/.exec(out)?.[1];
    expect(approval).toBeDefined();
    // (5) approved, and the retry replayed by the tracker: still two effects, from three POSTs.
    expect(out).toContain(`approved ${approval}`);
    expect(out).toMatch(/→ 201: issue #2 \S+ \(Idempotent-Replayed: true\)/);
    const ledgers = out.match(/fake API ledger: .*/g) ?? [];
    expect(ledgers.at(-1)).toBe('fake API ledger: 2 effect(s) (issues created) from 3 POST(s)');
    const posts = out.match(/POST \d {2}key (\S+) {2}(.*)/g) ?? [];
    expect(posts).toHaveLength(3);
    const keys = posts.map((p) => p.split(/\s+/)[3]);
    expect(keys[1]).toBe(keys[2]);
    expect(posts[2]).toContain('replayed #2, created nothing');
    // (6) the trail of that operation, rendered like `effectgate trail`.
    expect(out).toContain(`operation ${keys[1]}  SUCCEEDED  tool demo.create_issue`);
    expect(out).toContain('decision hold (outcome_unknown)');
    expect(out).toContain('operator_approved');
    expect(out).not.toContain('Press Ctrl-C');
    expect(existsSync(removedDir(out))).toBe(false);
    expect(readdirSync(env['TMPDIR']!)).toEqual([]);
  });

  it('without --no-wait: the printed timeline page answers with the printed token, and SIGINT stops it cleanly', async () => {
    const env = tmpEnv();
    const child = spawn(process.execPath, [BIN, 'demo'], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = once(child, 'exit') as Promise<[number | null]>;
    let out = '';
    let err = '';
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
    });
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no prompt in 30s\n${out}\n${err}`)), 30_000);
        child.stdout.on('data', (d: Buffer) => {
          out += d.toString();
          if (out.includes('Press Ctrl-C')) {
            clearTimeout(timer);
            resolve();
          }
        });
        child.once('exit', (code) => {
          clearTimeout(timer);
          reject(new Error(`demo exited with ${code} before waiting\n${out}\n${err}`));
        });
      });
      const page = /timeline {4}(http:\/\/127\.0\.0\.1:\d+\/ui\/operations\/(\S+))/.exec(out);
      const token = /token {7}(\S+)/.exec(out)?.[1];
      expect(page, out).not.toBeNull();
      expect(token).toBeDefined();
      const res = await fetch(page![1]!, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toContain('text/html');
      expect(await res.text()).toContain(page![2]!);
      // The token is what opens it.
      const without = await fetch(page![1]!, { redirect: 'manual' });
      expect(without.status).not.toBe(200);
    } finally {
      if (child.exitCode === null) child.kill('SIGINT');
    }
    const [code] = await exited;
    expect(code, `${out}\n${err}`).toBe(0);
    expect(existsSync(removedDir(out))).toBe(false);
    expect(readdirSync(env['TMPDIR']!)).toEqual([]);
  });
});
