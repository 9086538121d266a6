/**
 * The real `effectgate proxy` under a small file-descriptor limit (`ulimit -n 512`): its
 * connection caps fit under the limit, so one agent's idle CONNECT tunnels (two descriptors each:
 * client and destination; 300 of them need more than the limit) are answered or refused clearly
 * and never take the descriptors every other request needs (no EMFILE, no reset). 512, not less:
 * Node's module loader opens the gate's modules concurrently at start, some 300 files at once.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { connect as netConnect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { type ProxyProcess, startProxyProcess } from '../helpers/proxy-process.js';
import { startUpstream, type Upstream } from '../helpers/upstream.js';

const POLICIES = new URL('../fixtures/e2e-policies/', import.meta.url).pathname;
const TUNNELS = 300;

const dir = mkdtempSync(join(tmpdir(), 'effectgate-descriptors-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const opened: Socket[] = [];
let proxy: ProxyProcess | undefined;
let upstream: Upstream | undefined;
afterEach(async () => {
  for (const socket of opened.splice(0)) socket.destroy();
  await proxy?.stop();
  await upstream?.close();
});

/**
 * Opens a CONNECT tunnel from `localAddress` and resolves with the proxy's first answer: its
 * `200`, a complete response, or `reset` when the connection ends without one.
 */
function openTunnel(port: number, localAddress: string, authority: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = netConnect({ port, host: '127.0.0.1', localAddress });
    opened.push(socket);
    let text = '';
    socket.on('error', () => {});
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      const head = text.indexOf('\r\n\r\n');
      if (text.startsWith('HTTP/1.1 200 ') && head >= 0) resolve('established');
      const length = /\r\ncontent-length: (\d+)\r\n/i.exec(text);
      if (head >= 0 && length !== null && text.length >= head + 4 + Number(length[1])) resolve(text);
    });
    socket.on('close', () => resolve(text === '' ? 'reset' : text));
    socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
  });
}

/** A plain proxied GET on its own connection: its status and body, or the error that ended it. */
function getVia(port: number, localAddress: string, target: string): Promise<string> {
  return new Promise((resolve) => {
    const req = httpRequest({ host: '127.0.0.1', port, localAddress, path: target, agent: false }, (res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => {
        body += chunk.toString();
      });
      res.on('end', () => resolve(`${res.statusCode} ${body}`));
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve(`error ${err.code ?? err.message}`));
    req.end();
  });
}

describe('effectgate proxy under ulimit -n 512', () => {
  it(`answers ${TUNNELS} idle tunnels from one agent without starving a plain request`, async () => {
    upstream = await startUpstream();
    const authority = `127.0.0.1:${upstream.port}`;
    proxy = await startProxyProcess(
      [
        '--policies',
        POLICIES,
        '--store',
        `pglite:${join(dir, 'store')}`,
        '--allow-connect-ports',
        String(upstream.port),
        // The tunnels stay idle (said nothing) for the whole test, however slow the machine.
        '--tunnel-peek-timeout',
        '5m',
      ],
      {},
      'ulimit -n 512',
    );

    const answers = new Map<string, number>();
    for (let i = 0; i < TUNNELS; i += 1) {
      const answer = await openTunnel(proxy.port, '127.0.0.1', authority);
      const kind = answer === 'established' || answer === 'reset' ? answer : answer.split('\r\n', 1)[0]!;
      answers.set(kind, (answers.get(kind) ?? 0) + 1);
      // Any refusal is the caps' clear one, never a failed connect to the destination.
      if (kind !== 'established') expect(answer).toContain('too_many_connections');
    }
    expect(answers.get('reset')).toBeUndefined();
    expect(answers.get('established')).toBeGreaterThan(0);

    // Another client is served; the agent itself is served or refused clearly, never reset.
    const other = await getVia(proxy.port, '127.0.0.2', `${upstream.url}/other`);
    expect(other).toMatch(/^200 /);
    const same = await getVia(proxy.port, '127.0.0.1', `${upstream.url}/same`);
    expect(same).toMatch(/^(200 |503 .*too_many_connections)/);

    expect(proxy.child.exitCode).toBeNull();
    expect(proxy.stderr()).not.toMatch(/EMFILE/);
    // The lowered caps are said at start, with the limit they were fitted to.
    expect(proxy.stderr()).toMatch(/connection caps lowered to fit the file-descriptor limit/);
  }, 120_000);
});
