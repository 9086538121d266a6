/**
 * TLS material for the HTTPS scenarios, all in one temporary directory removed at the end:
 * a self-signed certificate for the HTTPS upstream (SAN 127.0.0.1, where the bench tool intercepts,
 * and 127.0.0.2, the tunnel's destination that no tool names; ECDSA P-256, made with openssl) and
 * the gate's CA (`node bin/effectgate.js ca init --dir <tmp>/ca`).
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface BenchTls {
  readonly dir: string;
  /** Upstream certificate and key (PEM files). */
  readonly upstreamCert: string;
  readonly upstreamKey: string;
  /** `--ca-dir` for the proxy. */
  readonly caDir: string;
  /** PEMs a client trusts: the gate CA (intercepted hosts) and the upstream's own certificate (tunnels). */
  readonly clientCa: readonly string[];
  remove(): Promise<void>;
}

function run(cmd: string, args: readonly string[]): void {
  const r = spawnSync(cmd, [...args], { encoding: 'utf8', timeout: 30_000 });
  if (r.status !== 0) throw new Error(`bench: ${cmd} ${args.join(' ')} failed: ${r.error ?? ''}${r.stderr}`);
}

export async function makeBenchTls(bin: string): Promise<BenchTls> {
  const dir = await mkdtemp(join(tmpdir(), 'eg-bench-tls-'));
  const remove = (): Promise<void> => rm(dir, { recursive: true, force: true });
  try {
    const upstreamCert = join(dir, 'upstream.pem');
    const upstreamKey = join(dir, 'upstream-key.pem');
    run('openssl', [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      upstreamKey,
      '-out',
      upstreamCert,
      '-days',
      '2',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1,IP:127.0.0.2',
    ]);
    const caDir = join(dir, 'ca');
    run(process.execPath, [bin, 'ca', 'init', '--dir', caDir]);
    const clientCa = [await readFile(join(caDir, 'ca.pem'), 'utf8'), await readFile(upstreamCert, 'utf8')];
    return { dir, upstreamCert, upstreamKey, caDir, clientCa, remove };
  } catch (err) {
    await remove();
    throw err;
  }
}
