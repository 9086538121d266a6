import { join } from 'node:path';
import { EffectgateError } from '../errors.js';
import { CA_CERT_FILE, CA_KEY_FILE, initCertificateAuthority, writeCaBundle } from '../proxy/index.js';
import { type FlagTable, parseFlags } from './parse-flags.js';

export const USAGE = `usage: effectgate ca init --dir DIR [--force]   (--force replaces an existing CA)
       effectgate ca bundle --ca-dir DIR --out FILE [--system FILE]
                            (the system roots, then DIR/ca.pem, never the key: for SSL_CERT_FILE,
                            REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE, which replace the system roots)
defaults: --system Node's bundled roots (tls.rootCertificates)`;

export const CA_OPTIONS = {
  dir: { type: 'string' },
  force: { type: 'boolean', default: false },
} as const satisfies FlagTable;

export const CA_BUNDLE_OPTIONS = {
  'ca-dir': { type: 'string' },
  out: { type: 'string' },
  system: { type: 'string' },
} as const satisfies FlagTable;

/**
 * `effectgate ca init --dir DIR [--force]`: creates the local CA the proxy intercepts HTTPS with
 * (`--ca-dir`). Prints where the certificate is, never the key.
 * `effectgate ca bundle --ca-dir DIR --out FILE [--system FILE]`: the trust bundle for clients
 * whose CA variable replaces the system roots (see proxy/ca-bundle.ts).
 */
export async function runCa(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === 'init') return init(rest);
  if (sub === 'bundle') return bundle(rest);
  process.stderr.write(`effectgate: unknown ca command ${JSON.stringify(sub ?? '')}\n${USAGE}\n`);
  return 2;
}

async function init(args: readonly string[]): Promise<number> {
  const { values } = parseFlags({ args: [...args], options: CA_OPTIONS }, USAGE);
  if (values.dir === undefined || values.dir === '') {
    throw new EffectgateError('EG_ERR_CONFIG_INVALID', `--dir is required (${USAGE}).`);
  }
  await initCertificateAuthority({ dir: values.dir, force: values.force });
  process.stdout.write(
    `CA created: ${join(values.dir, CA_CERT_FILE)} (trust this in clients; the key ${join(values.dir, CA_KEY_FILE)} stays private)\n`,
  );
  return 0;
}

async function bundle(args: readonly string[]): Promise<number> {
  const { values } = parseFlags({ args: [...args], options: CA_BUNDLE_OPTIONS }, USAGE);
  for (const name of ['ca-dir', 'out'] as const) {
    if (values[name] === undefined || values[name] === '')
      throw new EffectgateError('EG_ERR_CONFIG_INVALID', `ca bundle needs --${name} (${USAGE}).`);
  }
  if (values.system === '')
    throw new EffectgateError(
      'EG_ERR_CONFIG_INVALID',
      "--system needs a file name (omit it for Node's roots)",
    );
  const caDir = values['ca-dir'] as string;
  const out = values.out as string;
  const result = await writeCaBundle({
    caDir,
    out,
    ...(values.system === undefined ? {} : { system: values.system }),
  });
  process.stdout.write(
    `CA bundle written: ${out} (${result.systemRoots} system roots from ${result.systemSource}, then ${join(caDir, CA_CERT_FILE)})\n`,
  );
  return 0;
}
