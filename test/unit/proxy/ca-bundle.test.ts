import { X509Certificate } from 'node:crypto';
import {
  appendFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rootCertificates } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EffectgateError } from '../../../src/errors.js';
import { CertificateAuthority, initCertificateAuthority, writeCaBundle } from '../../../src/proxy/index.js';

const root = mkdtempSync(join(tmpdir(), 'effectgate-ca-bundle-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const blocks = (text: string): string[] =>
  [...text.matchAll(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)].map((m) => m[0]);
const fingerprint = (pem: string): string => new X509Certificate(pem).fingerprint256;

describe('writeCaBundle', () => {
  const gate = join(root, 'gate');
  const other = join(root, 'other');
  let gatePem: string;
  let otherPem: string;

  beforeAll(async () => {
    gatePem = await initCertificateAuthority({ dir: gate });
    // A second CA stands in for a system root the gate knows nothing of.
    otherPem = await initCertificateAuthority({ dir: other });
  });

  it("writes Node's bundled roots, then the gate's CA, mode 0644, without the key", async () => {
    const out = join(root, 'default.pem');
    const result = await writeCaBundle({ caDir: gate, out });
    const text = readFileSync(out, 'utf8');
    const certs = blocks(text);
    expect(result).toEqual({ systemRoots: rootCertificates.length, systemSource: 'tls.rootCertificates' });
    expect(certs).toHaveLength(rootCertificates.length + 1);
    expect(certs.slice(0, -1).map(fingerprint)).toEqual(rootCertificates.map(fingerprint));
    expect(fingerprint(certs.at(-1)!)).toBe(fingerprint(gatePem));
    expect(text).not.toContain('PRIVATE KEY');
    expect(statSync(out).mode & 0o777).toBe(0o644);
  });

  it('takes the system roots from --system, certificates only (no key, no stray text)', async () => {
    const system = join(root, 'system.pem');
    writeFileSync(
      system,
      `# a comment\n${otherPem}\n${readFileSync(join(other, 'ca-key.pem'), 'utf8')}trailing text\n`,
    );
    const out = join(root, 'system-bundle.pem');
    const result = await writeCaBundle({ caDir: gate, out, system });
    expect(result).toEqual({ systemRoots: 1, systemSource: system });
    const text = readFileSync(out, 'utf8');
    expect(blocks(text).map(fingerprint)).toEqual([fingerprint(otherPem), fingerprint(gatePem)]);
    expect(text).not.toContain('PRIVATE KEY');
    expect(text).not.toContain('comment');
  });

  it('never copies a key that was concatenated into ca.pem', async () => {
    const dir = join(root, 'with-key');
    const pem = await initCertificateAuthority({ dir });
    appendFileSync(join(dir, 'ca.pem'), readFileSync(join(dir, 'ca-key.pem')));
    const out = join(root, 'with-key.pem');
    await writeCaBundle({ caDir: dir, out, system: join(other, 'ca.pem') });
    const text = readFileSync(out, 'utf8');
    expect(text).not.toContain('PRIVATE KEY');
    expect(blocks(text).map(fingerprint)).toEqual([fingerprint(otherPem), fingerprint(pem)]);
  });

  it('replaces an existing bundle in one rename, leaving no temporary file', async () => {
    const dir = join(root, 'replace');
    mkdirSync(dir);
    const out = join(dir, 'bundle.pem');
    writeFileSync(out, 'old', { mode: 0o600 });
    await writeCaBundle({ caDir: gate, out, system: join(other, 'ca.pem') });
    expect(blocks(readFileSync(out, 'utf8'))).toHaveLength(2);
    expect(statSync(out).mode & 0o777).toBe(0o644);
    expect(readdirSync(dir)).toEqual(['bundle.pem']);
  });

  it('keeps the gate CA once, last, when --system already holds it (a previous bundle)', async () => {
    const first = join(root, 'first.pem');
    await writeCaBundle({ caDir: gate, out: first, system: join(other, 'ca.pem') });
    const second = join(root, 'second.pem');
    const result = await writeCaBundle({ caDir: gate, out: second, system: first });
    expect(result.systemRoots).toBe(1);
    expect(readFileSync(second, 'utf8')).toBe(readFileSync(first, 'utf8'));
  });

  describe('refuses clearly, writing nothing', () => {
    const refusal = async (options: Parameters<typeof writeCaBundle>[0]): Promise<string> => {
      const err = await writeCaBundle(options).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(EffectgateError);
      expect((err as EffectgateError).code).toBe('EG_ERR_CONFIG_INVALID');
      return (err as Error).message;
    };

    it('a CA directory without ca.pem', async () => {
      const empty = join(root, 'empty');
      mkdirSync(empty);
      const out = join(root, 'never.pem');
      expect(await refusal({ caDir: empty, out })).toBe(
        `--ca-dir ${empty} has no ca.pem (run \`effectgate ca init --dir ${empty}\` first)`,
      );
      expect(readdirSync(root)).not.toContain('never.pem');
    });

    it('an --out that is the CA itself', async () => {
      const before = readFileSync(join(gate, 'ca.pem'), 'utf8');
      for (const file of ['ca.pem', 'ca-key.pem']) {
        expect(await refusal({ caDir: gate, out: join(gate, '.', file) })).toContain(
          `is the CA's own ${file}`,
        );
      }
      expect(readFileSync(join(gate, 'ca.pem'), 'utf8')).toBe(before);
    });

    it('a ca.pem that is not one CA certificate', async () => {
      const leafDir = join(root, 'leaf');
      mkdirSync(leafDir);
      const authority = await CertificateAuthority.load(gate);
      writeFileSync(join(leafDir, 'ca.pem'), (await authority.leafFor('example.com')).cert);
      expect(await refusal({ caDir: leafDir, out: join(root, 'x.pem') })).toContain(
        'is not a CA certificate',
      );
      writeFileSync(join(leafDir, 'ca.pem'), `${gatePem}${otherPem}`);
      expect(await refusal({ caDir: leafDir, out: join(root, 'x.pem') })).toContain('holds 2 certificates');
      writeFileSync(join(leafDir, 'ca.pem'), 'not a certificate');
      expect(await refusal({ caDir: leafDir, out: join(root, 'x.pem') })).toContain('holds 0 certificates');
    });

    it('a --system file that is missing, holds no certificate or a damaged one', async () => {
      const out = join(root, 'never.pem');
      expect(await refusal({ caDir: gate, out, system: join(root, 'nope.pem') })).toMatch(
        /^--system .*nope\.pem: cannot read it: ENOENT/,
      );
      const none = join(root, 'none.pem');
      writeFileSync(none, readFileSync(join(other, 'ca-key.pem')));
      expect(await refusal({ caDir: gate, out, system: none })).toContain('holds no PEM certificate');
      const damaged = join(root, 'damaged.pem');
      writeFileSync(damaged, `${otherPem}-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n`);
      expect(await refusal({ caDir: gate, out, system: damaged })).toContain(
        '(certificate 2) is not a readable',
      );
      expect(readdirSync(root)).not.toContain('never.pem');
    });

    it('an --out in a folder that does not exist', async () => {
      const out = join(root, 'no-such-dir', 'bundle.pem');
      expect(await refusal({ caDir: gate, out })).toContain(`--out ${out}: cannot create a file in`);
    });
  });
});
