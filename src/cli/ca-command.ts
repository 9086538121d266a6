import { join } from 'node:path';
import { EffectgateError } from '../errors.js';
import { CA_CERT_FILE, CA_KEY_FILE, initCertificateAuthority } from '../proxy/index.js';
import { type FlagTable, parseFlags } from './parse-flags.js';

export const USAGE = 'usage: effectgate ca init --dir DIR [--force]   (--force replaces an existing CA)';

export const CA_OPTIONS = {
  dir: { type: 'string' },
  force: { type: 'boolean', default: false },
} as const satisfies FlagTable;

/**
 * `effectgate ca init --dir DIR [--force]`: creates the local CA the proxy intercepts HTTPS with
 * (`--ca-dir`). Prints where the certificate is, never the key.
 */
export async function runCa(argv: readonly string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub !== 'init') {
    process.stderr.write(`effectgate: unknown ca command ${JSON.stringify(sub ?? '')}\n${USAGE}\n`);
    return 2;
  }
  const { values } = parseFlags({ args: rest, options: CA_OPTIONS }, USAGE);
  if (values.dir === undefined || values.dir === '') {
    throw new EffectgateError('EG_ERR_CONFIG_INVALID', `--dir is required (${USAGE}).`);
  }
  await initCertificateAuthority({ dir: values.dir, force: values.force });
  process.stdout.write(
    `CA created: ${join(values.dir, CA_CERT_FILE)} (trust this in clients; the key ${join(values.dir, CA_KEY_FILE)} stays private)\n`,
  );
  return 0;
}
