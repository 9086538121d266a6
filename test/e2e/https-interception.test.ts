/**
 * HTTPS interception through the real `effectgate proxy` binary (`--ca-dir`): TLS to a host some
 * tool names is terminated with the local CA and governed like plain HTTP (curl, Python's
 * urllib, Node's tls), the gate dialling the real upstream over TLS (`--upstream-ca`); TLS to a
 * host no tool names is relayed untouched. Without `--ca-dir` TLS to a governed host is refused
 * (see connect-plain-http.test.ts).
 */
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect as netConnect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TLSSocket, connect as tlsConnect } from 'node:tls';
import { promisify } from 'node:util';
import { EnvHttpProxyAgent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ProxyProcess, runCli, startProxyProcess } from '../helpers/proxy-process.js';
import {
  type RecordedRequest,
  reply,
  selfSignedCert,
  startUpstream,
  type Upstream,
} from '../helpers/upstream.js';

const POLICIES = new URL('../fixtures/e2e-policies/', import.meta.url).pathname;
const run = promisify(execFile);

/** Opens a raw CONNECT tunnel and resolves once the proxy said 200. */
async function openTunnel(proxyPort: number, authority: string): Promise<Socket> {
  const socket = netConnect(proxyPort, '127.0.0.1');
  socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
  const [first] = (await once(socket, 'data')) as [Buffer];
  expect(first.toString()).toBe('HTTP/1.1 200 Connection Established\r\n\r\n');
  return socket;
}

/**
 * Collects what `tls` receives from now on (a listener stays attached, so no chunk is lost
 * between two waits); `until()` resolves with the text once `done` holds, and clears it.
 */
function collect(tls: TLSSocket): (done: (text: string) => boolean) => Promise<string> {
  let text = '';
  let wake = (): void => {};
  tls.on('data', (chunk: Buffer) => {
    text += chunk.toString('latin1');
    wake();
  });
  return (done) =>
    new Promise<string>((resolve) => {
      wake = () => {
        if (!done(text)) return;
        const got = text;
        text = '';
        resolve(got);
      };
      wake();
    });
}

describe('HTTPS interception through the proxy binary (pglite)', () => {
  let upstream: Upstream;
  /** On 127.0.0.2: an address no tool names (localhost is 127.0.0.1 to the gate, which tools name). */
  let elsewhere: Upstream;
  let proxy: ProxyProcess;
  let dir: string;
  let caPem: string;
  const upstreamCert = selfSignedCert();

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'effectgate-e2e-https-'));
    const init = await runCli(['ca', 'init', '--dir', join(dir, 'ca')]);
    expect(init.code).toBe(0);
    expect(init.stdout).not.toContain('PRIVATE KEY');
    caPem = join(dir, 'ca', 'ca.pem');
    writeFileSync(join(dir, 'upstream.pem'), upstreamCert.cert);
    upstream = await startUpstream(reply(201, { html_url: 'https://issues.example.test/1' }), {
      tls: upstreamCert,
    });
    elsewhere = await startUpstream(reply(201, { html_url: 'https://issues.example.test/1' }), {
      tls: upstreamCert,
      host: '127.0.0.2',
    });
    proxy = await startProxyProcess([
      '--policies',
      POLICIES,
      '--store',
      `pglite:${join(dir, 'store')}`,
      // Only the port no tool names: TLS to 127.0.0.1, which tools name on any port, is
      // intercepted on its own port without the flag.
      '--allow-connect-ports',
      String(elsewhere.port),
      '--ca-dir',
      join(dir, 'ca'),
      '--upstream-ca',
      join(dir, 'upstream.pem'),
    ]);
  });

  afterAll(async () => {
    await proxy?.stop();
    await upstream?.close();
    await elsewhere?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const issuesTitled = (title: string): RecordedRequest[] =>
    upstream.requests.filter((r) => r.body.toString().includes(`"${title}"`));

  it('curl trusting the gate CA is governed: 201 allow, then 409 duplicate; one request upstream', async () => {
    const curl = async (): Promise<string> =>
      (
        await run('curl', [
          '-s',
          '-i',
          '--cacert',
          caPem,
          '-x',
          proxy.url,
          '-X',
          'POST',
          '-H',
          'content-type: application/json',
          `https://127.0.0.1:${upstream.port}/repos/acme/api/issues`,
          '-d',
          '{"title":"via curl"}',
        ])
      ).stdout;
    const first = await curl();
    expect(first).toMatch(/^HTTP\/1\.1 201/m);
    expect(first).toMatch(/^effectgate-verdict: allow/im);
    const second = await curl();
    expect(second).toMatch(/^HTTP\/1\.1 409/m);
    expect(second).toMatch(/^effectgate-verdict: duplicate/im);
    expect(issuesTitled('via curl')).toHaveLength(1);
    expect(issuesTitled('via curl')[0]!.headers['idempotency-key']).toBeDefined();
  });

  it("Python's urllib (HTTPS_PROXY, SSL_CERT_FILE) is governed the same way", async () => {
    const script = [
      'import sys, urllib.request, urllib.error',
      'for _ in range(2):',
      '    req = urllib.request.Request(sys.argv[1], data=b\'{"title": "via python"}\', method="POST", headers={"content-type": "application/json"})',
      '    try:',
      '        with urllib.request.urlopen(req) as r: print(r.status, r.headers["effectgate-verdict"])',
      '    except urllib.error.HTTPError as e: print(e.code, e.headers["effectgate-verdict"])',
    ].join('\n');
    const { stdout } = await run(
      'python3',
      ['-c', script, `https://127.0.0.1:${upstream.port}/repos/acme/api/issues`],
      {
        env: {
          ...process.env,
          HTTPS_PROXY: proxy.url,
          https_proxy: proxy.url,
          NO_PROXY: '',
          no_proxy: '',
          SSL_CERT_FILE: caPem,
        },
      },
    );
    expect(stdout.trim().split('\n')).toEqual(['201 allow', '409 duplicate']);
    expect(issuesTitled('via python')).toHaveLength(1);
  });

  it("Node fetch through undici's EnvHttpProxyAgent (trusting the CA) is governed the same way", async () => {
    const agent = new EnvHttpProxyAgent({
      httpsProxy: proxy.url,
      noProxy: '',
      requestTls: { ca: readFileSync(caPem, 'utf8') },
    });
    try {
      const create = async (): Promise<[number, string | null]> => {
        const res = await undiciFetch(`https://127.0.0.1:${upstream.port}/repos/acme/api/issues`, {
          method: 'POST',
          dispatcher: agent,
          // Its own run: the loop breaker halts a run after three duplicates (the file's tests add up).
          headers: { 'content-type': 'application/json', 'effectgate-run': 'node-fetch' },
          body: JSON.stringify({ title: 'via node' }),
        });
        await res.arrayBuffer();
        return [res.status, res.headers.get('effectgate-verdict')];
      };
      expect(await create()).toEqual([201, 'allow']);
      expect(await create()).toEqual([409, 'duplicate']);
      expect(issuesTitled('via node')).toHaveLength(1);
    } finally {
      await agent.close();
    }
  });

  it('serves several requests in one intercepted tunnel, with a leaf issued by the gate CA', async () => {
    const raw = await openTunnel(proxy.port, `127.0.0.1:${upstream.port}`);
    const tls = tlsConnect({ socket: raw, host: '127.0.0.1', ca: readFileSync(caPem) });
    await once(tls, 'secureConnect');
    const leaf = new X509Certificate(tls.getPeerX509Certificate()!.raw);
    expect(leaf.checkIssued(new X509Certificate(readFileSync(caPem)))).toBe(true);
    expect(leaf.checkIP('127.0.0.1')).toBe('127.0.0.1');
    const post = (title: string): string => {
      const body = JSON.stringify({ title });
      return `POST /repos/acme/api/issues HTTP/1.1\r\nHost: 127.0.0.1:${upstream.port}\r\ncontent-type: application/json\r\neffectgate-run: kept-alive\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
    };
    const until = collect(tls);
    tls.write(post('kept alive'));
    const first = await until((t) => t.includes('issues.example.test/1'));
    expect(first).toMatch(/^HTTP\/1\.1 201/);
    tls.write(post('kept alive'));
    const second = await until((t) => t.includes('"verdict":"duplicate"'));
    expect(second).toMatch(/^HTTP\/1\.1 409/);
    tls.destroy();
    expect(issuesTitled('kept alive')).toHaveLength(1);
  });

  it('relays TLS to a host no tool names: the client sees the upstream certificate', async () => {
    const before = elsewhere.requests.length;
    const { stdout, stderr } = await run('curl', [
      '-s',
      '-v',
      '--cacert',
      join(dir, 'upstream.pem'),
      '-x',
      proxy.url,
      `https://127.0.0.2:${elsewhere.port}/plain`,
    ]);
    expect(stdout).toContain('issues.example.test');
    expect(elsewhere.requests.at(-1)?.url).toBe('/plain');
    expect(stderr).toMatch(/issuer: CN=localhost/);
    expect(stderr).not.toContain('effectgate local CA');
    expect(elsewhere.requests.length).toBe(before + 1);

    const raw = await openTunnel(proxy.port, `127.0.0.2:${elsewhere.port}`);
    // No SNI (an IP literal): a name in it would be routed too, and localhost is 127.0.0.1.
    const tls = tlsConnect({ socket: raw, host: '127.0.0.2', ca: upstreamCert.cert });
    await once(tls, 'secureConnect');
    expect(tls.getPeerCertificate().fingerprint256).toBe(
      new X509Certificate(upstreamCert.cert).fingerprint256,
    );
    tls.destroy();
  });

  it('a client that does not trust the gate CA fails the handshake and nothing is sent', async () => {
    const before = upstream.requests.length;
    await expect(
      run('curl', [
        '-s',
        '-x',
        proxy.url,
        '-X',
        'POST',
        `https://127.0.0.1:${upstream.port}/repos/acme/api/issues`,
        '-d',
        '{"title":"untrusted"}',
      ]),
    ).rejects.toMatchObject({ code: 60 });
    expect(upstream.requests.length).toBe(before);
  });
});
