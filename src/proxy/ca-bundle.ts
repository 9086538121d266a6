/**
 * The combined trust bundle an agent's OpenSSL-based clients are pointed at (`SSL_CERT_FILE`,
 * `REQUESTS_CA_BUNDLE`, `CURL_CA_BUNDLE`). Those variables *replace* the system roots, so the
 * gate's CA alone would break every HTTPS host the gate does not intercept (tunnelled byte for
 * byte, presenting its real certificate). The bundle is the system roots followed by the gate's
 * CA certificate; `NODE_EXTRA_CA_CERTS` adds to Node's roots and keeps taking `ca.pem` alone.
 */
import { randomBytes, X509Certificate } from 'node:crypto';
import { type FileHandle, open, readFile, rename, unlink } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { rootCertificates } from 'node:tls';
import { EffectgateError } from '../errors.js';
import { CA_CERT_FILE, CA_KEY_FILE } from './certificate-authority.js';

/** Readable by every user of the pod or container: it holds public certificates only. */
const BUNDLE_MODE = 0o644;

/**
 * Only `CERTIFICATE` blocks are ever carried over, whatever else a file holds, so a `ca.pem` that
 * someone concatenated with its key (or a system file with stray text) never puts a private key
 * into a file every client of the pod reads.
 */
const CERTIFICATE_BLOCK = /-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+?-----END CERTIFICATE-----/g;

export interface CaBundleOptions {
  /** The gate's CA directory (`--ca-dir`); only its `ca.pem` is read, never the key. */
  readonly caDir: string;
  /** Where the bundle goes; replaced atomically (written beside it, then renamed). */
  readonly out: string;
  /** A PEM file of system roots (e.g. /etc/ssl/certs/ca-certificates.crt); default Node's bundled roots. */
  readonly system?: string;
}

export interface CaBundleResult {
  /** System roots written, before the gate's CA (a copy of the gate's CA among them is dropped). */
  readonly systemRoots: number;
  /** Where the system roots came from: the `system` file, or `tls.rootCertificates`. */
  readonly systemSource: string;
}

/** Writes `options.out`: the system roots, then the gate's CA certificate, mode 0644. */
export async function writeCaBundle(options: CaBundleOptions): Promise<CaBundleResult> {
  const certPath = join(options.caDir, CA_CERT_FILE);
  const out = resolve(options.out);
  // The bundle must never land on the CA itself: ca.pem replaced by a bundle would make the gate
  // sign with a key whose certificate is no longer first in its file, and the key is never output.
  for (const file of [CA_CERT_FILE, CA_KEY_FILE]) {
    if (out === resolve(options.caDir, file))
      throw invalid(`--out ${options.out} is the CA's own ${file}; write the bundle elsewhere`);
  }
  const gateCa = await readGateCa(options.caDir, certPath);
  const system = await readSystemRoots(options.system);
  // Dropped from the system part so the gate's CA is there once, last, whatever --system held
  // (e.g. a previous bundle).
  const roots = system.filter((pem) => new X509Certificate(pem).fingerprint256 !== gateCa.fingerprint256);
  const text = `${[...roots, gateCa.toString().trim()].join('\n')}\n`;
  await replaceFile(out, text);
  return {
    systemRoots: roots.length,
    systemSource: options.system ?? 'tls.rootCertificates',
  };
}

async function readGateCa(caDir: string, certPath: string): Promise<X509Certificate> {
  let text: string;
  try {
    text = await readFile(certPath, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw invalid(
      code === 'ENOENT'
        ? `--ca-dir ${caDir} has no ${CA_CERT_FILE} (run \`effectgate ca init --dir ${caDir}\` first)`
        : `--ca-dir ${caDir}: cannot read ${CA_CERT_FILE}: ${(err as Error).message}`,
      err,
    );
  }
  const blocks = certificateBlocks(text);
  if (blocks.length !== 1)
    throw invalid(
      `${certPath} holds ${blocks.length} certificates; the gate's CA is exactly one (as \`effectgate ca init\` writes it)`,
    );
  const cert = parse(blocks[0]!, certPath);
  if (!cert.ca) throw invalid(`${certPath} is not a CA certificate (basicConstraints CA:FALSE)`);
  return cert;
}

async function readSystemRoots(system: string | undefined): Promise<string[]> {
  if (system === undefined) return [...rootCertificates];
  let text: string;
  try {
    text = await readFile(system, 'utf8');
  } catch (err) {
    throw invalid(`--system ${system}: cannot read it: ${(err as Error).message}`, err);
  }
  const blocks = certificateBlocks(text);
  if (blocks.length === 0)
    throw invalid(`--system ${system} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
  // Parsed once here so a damaged root is refused by name rather than skipped by a client later.
  for (const [i, pem] of blocks.entries()) parse(pem, `${system} (certificate ${i + 1})`);
  return blocks;
}

function certificateBlocks(text: string): string[] {
  return [...text.matchAll(CERTIFICATE_BLOCK)].map((m) => m[0].replaceAll('\r\n', '\n'));
}

function parse(pem: string, where: string): X509Certificate {
  try {
    return new X509Certificate(pem);
  } catch (err) {
    throw invalid(`${where} is not a readable certificate: ${(err as Error).message}`, err);
  }
}

/**
 * Written to a fresh file beside `out` and renamed over it, so a reader (an agent starting, a
 * second run of the init container) sees the old bundle or the new one, never half of one.
 */
async function replaceFile(out: string, text: string): Promise<void> {
  const temp = join(dirname(out), `.${randomBytes(6).toString('hex')}.ca-bundle.tmp`);
  let handle: FileHandle;
  try {
    handle = await open(temp, 'wx', BUNDLE_MODE);
  } catch (err) {
    throw invalid(`--out ${out}: cannot create a file in ${dirname(out)}: ${(err as Error).message}`, err);
  }
  let done = false;
  try {
    // open()'s mode is narrowed by the umask; the bundle is meant for every user of the pod.
    await handle.chmod(BUNDLE_MODE);
    await handle.writeFile(text);
    await handle.sync();
    await handle.close();
    await rename(temp, out).catch((err: unknown) => {
      throw invalid(`--out ${out}: cannot replace it: ${(err as Error).message}`, err);
    });
    done = true;
  } finally {
    if (!done) {
      await handle.close().catch(() => undefined);
      await unlink(temp).catch(() => undefined);
    }
  }
}

function invalid(message: string, cause?: unknown): EffectgateError {
  return new EffectgateError('EG_ERR_CONFIG_INVALID', message, cause === undefined ? {} : { cause });
}
