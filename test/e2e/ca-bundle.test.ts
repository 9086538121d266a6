/**
 * `effectgate ca bundle` with the built CLI, checked by real OpenSSL clients the way an agent
 * container uses the bundle: curl reading `CURL_CA_BUNDLE`, Python's urllib reading
 * `SSL_CERT_FILE`. Two loopback HTTPS servers: one presents a leaf of the gate's CA (what an
 * intercepted governed host shows), the other a leaf of another CA given as `--system` (a system
 * root: what an ungoverned host, tunnelled untouched, shows). The bundle must trust both; the gate
 * CA alone (what the manifests used to set) must not trust the second.
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CertificateAuthority } from '../../src/proxy/index.js';
import { runCli } from '../helpers/proxy-process.js';
import { reply, startUpstream, type Upstream } from '../helpers/upstream.js';

const run = promisify(execFile);

/**
 * This machine's own trust settings and proxies removed, so a client trusts exactly the file the
 * test gives it and dials loopback directly.
 */
const CLEAN_ENV: NodeJS.ProcessEnv = Object.fromEntries(
  Object.entries(process.env).filter(
    ([name]) =>
      !/^(CURL_CA_BUNDLE|SSL_CERT_FILE|SSL_CERT_DIR|REQUESTS_CA_BUNDLE|NIX_SSL_CERT_FILE|NODE_EXTRA_CA_CERTS)$/.test(
        name,
      ) && !/_proxy$/i.test(name),
  ),
);

/** curl with `CURL_CA_BUNDLE=file`: the status, or curl's exit code (60: not verified). */
async function curl(file: string, url: string): Promise<string> {
  try {
    const { stdout } = await run('curl', ['-sS', '-o', '/dev/null', '-w', '%{http_code}', url], {
      env: { ...CLEAN_ENV, CURL_CA_BUNDLE: file },
    });
    return stdout;
  } catch (err) {
    return `exit ${(err as { code: number }).code}`;
  }
}

/** Python's urllib with `SSL_CERT_FILE=file` (its default context reads it): the status, or the error. */
async function python(file: string, url: string): Promise<string> {
  const script = [
    'import ssl, sys, urllib.request',
    'try: print(urllib.request.urlopen(sys.argv[1], timeout=10).status)',
    'except urllib.error.URLError as e: print("refused", type(e.reason).__name__)',
  ].join('\n');
  const { stdout } = await run('python3', ['-c', script, url], {
    env: { ...CLEAN_ENV, SSL_CERT_FILE: file },
  });
  return stdout.trim();
}

/** A root CA and a leaf it signed for localhost, with openssl: a system root the gate never saw. */
function otherRoot(dir: string): { root: string; key: string; cert: string } {
  const at = (f: string): string => join(dir, f);
  const quiet = { stdio: 'ignore' } as const;
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      at('root-key.pem'),
      '-out',
      at('root.pem'),
    ].concat(
      ['-days', '2', '-subj', '/CN=test system root', '-addext', 'basicConstraints=critical,CA:TRUE'],
      ['-addext', 'keyUsage=critical,keyCertSign,cRLSign'],
    ),
    quiet,
  );
  execFileSync(
    'openssl',
    ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', at('leaf-key.pem'), '-out', at('leaf.csr')].concat([
      '-subj',
      '/CN=localhost',
    ]),
    quiet,
  );
  writeFileSync(
    at('leaf.ext'),
    'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n',
  );
  execFileSync(
    'openssl',
    ['x509', '-req', '-in', at('leaf.csr'), '-CA', at('root.pem'), '-CAkey', at('root-key.pem')].concat([
      '-CAcreateserial',
      '-out',
      at('leaf.pem'),
      '-days',
      '2',
      '-extfile',
      at('leaf.ext'),
    ]),
    quiet,
  );
  return {
    root: at('root.pem'),
    key: readFileSync(at('leaf-key.pem'), 'utf8'),
    cert: readFileSync(at('leaf.pem'), 'utf8'),
  };
}

describe('effectgate ca bundle, trusted by curl and Python', () => {
  let dir: string;
  let ca: string;
  let system: string;
  let bundle: string;
  let governed: Upstream;
  let ungoverned: Upstream;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'effectgate-e2e-ca-bundle-'));
    ca = join(dir, 'ca');
    expect((await runCli(['ca', 'init', '--dir', ca])).code).toBe(0);
    mkdirSync(join(dir, 'other'));
    const other = otherRoot(join(dir, 'other'));
    system = other.root;
    // The leaf the gate itself would present for an intercepted host.
    const leaf = await (await CertificateAuthority.load(ca)).leafFor('localhost');
    governed = await startUpstream(reply(200), { tls: leaf });
    ungoverned = await startUpstream(reply(200), { tls: { key: other.key, cert: other.cert } });
    bundle = join(dir, 'out', 'ca-bundle.pem');
    mkdirSync(join(dir, 'out'));
    const r = await runCli(['ca', 'bundle', '--ca-dir', ca, '--out', bundle, '--system', system]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(
      `CA bundle written: ${bundle} (1 system roots from ${system}, then ${join(ca, 'ca.pem')})\n`,
    );
  }, 60_000);

  afterAll(async () => {
    await governed?.close();
    await ungoverned?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  const hosts = (): [string, string] => [
    `https://localhost:${governed.port}/`,
    `https://localhost:${ungoverned.port}/`,
  ];

  it('is the public certificates only, mode 0644', () => {
    const text = readFileSync(bundle, 'utf8');
    expect(text.match(/BEGIN CERTIFICATE/g)).toHaveLength(2);
    expect(text).not.toContain('PRIVATE KEY');
    expect(text.trimEnd().endsWith(readFileSync(join(ca, 'ca.pem'), 'utf8').trimEnd())).toBe(true);
    expect(statSync(bundle).mode & 0o777).toBe(0o644);
  });

  it("curl (CURL_CA_BUNDLE) trusts the gate's leaf and the system root's leaf", async () => {
    const [gated, direct] = hosts();
    expect(await curl(bundle, gated)).toBe('200');
    expect(await curl(bundle, direct)).toBe('200');
    // What the manifests set before: the gate's CA alone fails the host it does not intercept.
    expect(await curl(join(ca, 'ca.pem'), gated)).toBe('200');
    expect(await curl(join(ca, 'ca.pem'), direct)).toBe('exit 60');
    expect(await curl(system, gated)).toBe('exit 60');
  });

  it("Python's urllib (SSL_CERT_FILE) trusts both", async () => {
    const [gated, direct] = hosts();
    expect(await python(bundle, gated)).toBe('200');
    expect(await python(bundle, direct)).toBe('200');
    expect(await python(join(ca, 'ca.pem'), direct)).toBe('refused SSLCertVerificationError');
  });

  it("defaults --system to Node's bundled roots, still ending with the gate's CA", async () => {
    const out = join(dir, 'out', 'default.pem');
    const r = await runCli(['ca', 'bundle', `--ca-dir=${ca}`, `--out=${out}`]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/\(\d{2,} system roots from tls\.rootCertificates, then /);
    const [gated, direct] = hosts();
    expect(await curl(out, gated)).toBe('200');
    expect(await curl(out, direct)).toBe('exit 60');
  });

  it('refuses a CA directory without ca.pem, and a bad command line, writing nothing', async () => {
    const empty = join(dir, 'empty');
    mkdirSync(empty);
    const out = join(dir, 'out', 'never.pem');
    const missing = await runCli(['ca', 'bundle', '--ca-dir', empty, '--out', out]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(
      `effectgate: EG_ERR_CONFIG_INVALID: --ca-dir ${empty} has no ca.pem (run \`effectgate ca init --dir ${empty}\` first)\n`,
    );
    const noOut = await runCli(['ca', 'bundle', '--ca-dir', ca]);
    expect(noOut.code).toBe(1);
    expect(noOut.stderr).toContain('ca bundle needs --out');
    const typo = await runCli(['ca', 'bundle', '--ca-dir', ca, '--out', out, '--sytem', system]);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('unknown flag --sytem (did you mean --system?)');
    expect(() => statSync(out)).toThrow(/ENOENT/);
  });
});
