/**
 * The local certificate authority used to intercept HTTPS to governed hosts (docs/design.md §4.2):
 * `effectgate ca init` makes it once, the proxy loads it with `--ca-dir` and issues short-lived
 * leaf certificates per host, on demand. ECDSA P-256 over Node's webcrypto (no openssl process).
 */
// @peculiar/x509 (via tsyringe) needs the Reflect metadata polyfill loaded before it.
import 'reflect-metadata';
import { createPrivateKey, randomBytes, webcrypto } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, open, readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { join } from 'node:path';
import * as x509 from '@peculiar/x509';
import { EffectgateError } from '../errors.js';

type CryptoKey = webcrypto.CryptoKey;
/** Node's webcrypto, typed as the provider @peculiar/x509 expects (this project has no DOM lib). */
const crypto = webcrypto as unknown as NonNullable<
  Parameters<typeof x509.X509CertificateGenerator.create>[1]
>;
const EC_KEY = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGNING = { ...EC_KEY, hash: 'SHA-256' } as const;

export const CA_CERT_FILE = 'ca.pem';
export const CA_KEY_FILE = 'ca-key.pem';

const HOUR_MS = 3_600_000;
const CA_VALIDITY_MS = 3653 * 24 * HOUR_MS;
/** Short-lived leaves: a leaked one is useless within days, and the proxy re-issues on restart. */
const LEAF_VALIDITY_MS = 7 * 24 * HOUR_MS;
/** Back-dated so a client whose clock is a little behind still accepts a fresh leaf. */
const LEAF_BACKDATE_MS = HOUR_MS;
const DEFAULT_CACHE_SIZE = 1000;

/** A leaf key pair and certificate (PEM) for one host, ready for `tls.createSecureContext`. */
export interface LeafCertificate {
  readonly key: string;
  readonly cert: string;
}

export interface InitCaOptions {
  readonly dir: string;
  /** Replace an existing `ca.pem`/`ca-key.pem`. */
  readonly force?: boolean;
  readonly now?: Date;
}

/** Creates the CA in `dir` (mode 0700) as `ca.pem` and `ca-key.pem` (0600). Returns the cert PEM. */
export async function initCertificateAuthority(options: InitCaOptions): Promise<string> {
  const now = options.now ?? new Date();
  const keys = await crypto.subtle.generateKey(EC_KEY, true, ['sign', 'verify']);
  const cert = await x509.X509CertificateGenerator.createSelfSigned(
    {
      serialNumber: serialNumber(),
      name: 'CN=effectgate local CA, O=effectgate',
      notBefore: new Date(now.getTime() - LEAF_BACKDATE_MS),
      notAfter: new Date(now.getTime() + CA_VALIDITY_MS),
      signingAlgorithm: SIGNING,
      keys,
      extensions: [
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
      ],
    },
    crypto,
  );
  const certPem = cert.toString('pem');
  const keyPem = pkcs8Pem(await crypto.subtle.exportKey('pkcs8', keys.privateKey));
  await mkdir(options.dir, { recursive: true, mode: 0o700 });
  await chmod(options.dir, 0o700);
  // Checked before writing so a half-existing CA is never paired with a new half; 'wx' then
  // still refuses a file that appeared meanwhile (two `ca init` racing).
  if (options.force !== true) {
    for (const file of [CA_KEY_FILE, CA_CERT_FILE]) {
      if (existsSync(join(options.dir, file))) throw alreadyExists(join(options.dir, file));
    }
  }
  const flag = options.force === true ? 'w' : 'wx';
  await writeNew(join(options.dir, CA_KEY_FILE), keyPem, flag, 0o600);
  await writeNew(join(options.dir, CA_CERT_FILE), certPem, flag, 0o644);
  return certPem;
}

async function writeNew(path: string, text: string, flag: 'w' | 'wx', mode: number): Promise<void> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(path, flag, mode);
  } catch (err) {
    throw (err as NodeJS.ErrnoException).code === 'EEXIST' ? alreadyExists(path) : err;
  }
  try {
    // The mode of open() only applies to a new file (and the umask); a replaced key is narrowed too.
    await handle.chmod(mode);
    await handle.writeFile(text);
  } finally {
    await handle.close();
  }
}

function alreadyExists(path: string): EffectgateError {
  return new EffectgateError(
    'EG_ERR_CONFIG_INVALID',
    `${path} already exists; pass --force to replace the CA (clients trusting the old one must trust the new one).`,
  );
}

export interface CertificateAuthorityOptions {
  /** Most leaves kept in memory; the oldest is dropped beyond it. Default 1000. */
  readonly cacheSize?: number;
}

/** A loaded CA: issues and caches leaf certificates for the hosts it intercepts. */
export class CertificateAuthority {
  readonly #cert: x509.X509Certificate;
  readonly #key: CryptoKey;
  readonly #cacheSize: number;
  readonly #leaves = new Map<string, Promise<LeafCertificate>>();

  private constructor(cert: x509.X509Certificate, key: CryptoKey, options: CertificateAuthorityOptions) {
    this.#cert = cert;
    this.#key = key;
    this.#cacheSize = options.cacheSize ?? DEFAULT_CACHE_SIZE;
  }

  /** Loads `ca.pem` and `ca-key.pem` from `dir` (as written by `effectgate ca init`). */
  static async load(dir: string, options: CertificateAuthorityOptions = {}): Promise<CertificateAuthority> {
    let certPem: string;
    let keyPem: string;
    try {
      certPem = await readFile(join(dir, CA_CERT_FILE), 'utf8');
      keyPem = await readFile(join(dir, CA_KEY_FILE), 'utf8');
    } catch (err) {
      throw new EffectgateError(
        'EG_ERR_CONFIG_INVALID',
        `--ca-dir ${dir}: cannot read ${CA_CERT_FILE}/${CA_KEY_FILE} (run \`effectgate ca init --dir ${dir}\`): ${(err as Error).message}`,
        { cause: err },
      );
    }
    try {
      const cert = new x509.X509Certificate(certPem);
      // Node parses any PEM private key form; webcrypto wants PKCS#8 DER.
      const der = createPrivateKey(keyPem).export({ type: 'pkcs8', format: 'der' });
      const key = await crypto.subtle.importKey('pkcs8', der, EC_KEY, false, ['sign']);
      return new CertificateAuthority(cert, key, options);
    } catch (err) {
      throw new EffectgateError(
        'EG_ERR_CONFIG_INVALID',
        `--ca-dir ${dir}: the CA is not an ECDSA P-256 certificate and key: ${(err as Error).message}`,
        { cause: err },
      );
    }
  }

  /** The CA certificate (PEM), the trust anchor clients are given. */
  get certPem(): string {
    return this.#cert.toString('pem');
  }

  /**
   * The leaf for `host` (a DNS name or an IP address). Concurrent calls for one host share one
   * issuance; a failed issuance is forgotten so the next call retries.
   */
  leafFor(host: string): Promise<LeafCertificate> {
    const name = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
    const cached = this.#leaves.get(name);
    if (cached !== undefined) {
      // Re-inserted: the Map's order is then least recently used first.
      this.#leaves.delete(name);
      this.#leaves.set(name, cached);
      return cached;
    }
    const pending = this.#issue(name);
    pending.catch(() => this.#leaves.delete(name));
    this.#leaves.set(name, pending);
    while (this.#leaves.size > this.#cacheSize) {
      const oldest = this.#leaves.keys().next().value as string;
      this.#leaves.delete(oldest);
    }
    return pending;
  }

  async #issue(host: string, now = new Date()): Promise<LeafCertificate> {
    const keys = await crypto.subtle.generateKey(EC_KEY, true, ['sign', 'verify']);
    const cert = await x509.X509CertificateGenerator.create(
      {
        serialNumber: serialNumber(),
        // A CN is at most 64 characters (RFC 5280 ub-common-name); clients match the SAN anyway.
        subject: `CN=${host.length <= 64 ? host : 'effectgate leaf'}`,
        issuer: this.#cert.subject,
        notBefore: new Date(now.getTime() - LEAF_BACKDATE_MS),
        notAfter: new Date(now.getTime() + LEAF_VALIDITY_MS),
        signingAlgorithm: SIGNING,
        publicKey: keys.publicKey,
        signingKey: this.#key,
        extensions: [
          new x509.BasicConstraintsExtension(false, undefined, true),
          new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
          new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth], false),
          new x509.SubjectAlternativeNameExtension([{ type: isIP(host) === 0 ? 'dns' : 'ip', value: host }]),
          await x509.AuthorityKeyIdentifierExtension.create(this.#cert, false, crypto),
        ],
      },
      crypto,
    );
    return {
      key: pkcs8Pem(await crypto.subtle.exportKey('pkcs8', keys.privateKey)),
      cert: cert.toString('pem'),
    };
  }
}

/** 16 random bytes, top bit cleared: a positive serial (RFC 5280 §4.1.2.2). */
function serialNumber(): string {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0] ?? 0) & 0x7f;
  return bytes.toString('hex');
}

function pkcs8Pem(der: ArrayBuffer): string {
  return x509.PemConverter.encode(der, 'PRIVATE KEY');
}
