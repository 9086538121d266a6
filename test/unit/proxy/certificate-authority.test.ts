import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EffectgateError } from '../../../src/errors.js';
import { CertificateAuthority, initCertificateAuthority } from '../../../src/proxy/index.js';

const root = mkdtempSync(join(tmpdir(), 'effectgate-ca-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('initCertificateAuthority', () => {
  it('writes a self-signed P-256 CA with a private key file (0600) in a 0700 directory', async () => {
    const dir = join(root, 'ca');
    await initCertificateAuthority({ dir });
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, 'ca-key.pem')).mode & 0o777).toBe(0o600);
    const ca = new X509Certificate(readFileSync(join(dir, 'ca.pem')));
    expect(ca.ca).toBe(true);
    expect(ca.verify(ca.publicKey)).toBe(true);
    expect(ca.publicKey.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    const years = (Date.parse(ca.validTo) - Date.now()) / (365 * 24 * 3_600_000);
    expect(years).toBeGreaterThan(9.9);
    expect(readFileSync(join(dir, 'ca-key.pem'), 'utf8')).toContain('BEGIN PRIVATE KEY');
  });

  it('refuses to replace an existing CA unless forced', async () => {
    const dir = join(root, 'twice');
    await initCertificateAuthority({ dir });
    const before = readFileSync(join(dir, 'ca.pem'), 'utf8');
    await expect(initCertificateAuthority({ dir })).rejects.toBeInstanceOf(EffectgateError);
    expect(readFileSync(join(dir, 'ca.pem'), 'utf8')).toBe(before);
    await initCertificateAuthority({ dir, force: true });
    expect(readFileSync(join(dir, 'ca.pem'), 'utf8')).not.toBe(before);
    expect(statSync(join(dir, 'ca-key.pem')).mode & 0o777).toBe(0o600);
  });
});

describe('CertificateAuthority', () => {
  it('issues leaves for DNS names and IPs that chain to the CA', async () => {
    const dir = join(root, 'leaves');
    await initCertificateAuthority({ dir });
    const authority = await CertificateAuthority.load(dir);
    const ca = new X509Certificate(authority.certPem);

    const dns = new X509Certificate((await authority.leafFor('api.example.com')).cert);
    expect(dns.verify(ca.publicKey)).toBe(true);
    expect(dns.checkIssued(ca)).toBe(true);
    expect(dns.ca).toBe(false);
    expect(dns.checkHost('api.example.com')).toBe('api.example.com');
    expect(dns.checkHost('other.example.com')).toBeUndefined();
    const days = (Date.parse(dns.validTo) - Date.parse(dns.validFrom)) / (24 * 3_600_000);
    expect(days).toBeLessThanOrEqual(8);
    expect(Date.parse(dns.validFrom)).toBeLessThan(Date.now() - 30 * 60_000);

    const ip = new X509Certificate((await authority.leafFor('127.0.0.1')).cert);
    expect(ip.verify(ca.publicKey)).toBe(true);
    expect(ip.checkIP('127.0.0.1')).toBe('127.0.0.1');
    const v6 = new X509Certificate((await authority.leafFor('[::1]')).cert);
    expect(v6.checkIP('::1')).toBe('::1');
  });

  it('shares one issuance between concurrent requests and bounds the cache', async () => {
    const dir = join(root, 'cache');
    await initCertificateAuthority({ dir });
    const authority = await CertificateAuthority.load(dir, { cacheSize: 2 });
    const [a, b] = [authority.leafFor('a.test'), authority.leafFor('a.test')];
    expect(a).toBe(b);
    await authority.leafFor('b.test');
    await authority.leafFor('c.test');
    expect(authority.leafFor('a.test')).not.toBe(a);
  });

  it('names the missing files when the directory holds no CA', async () => {
    await expect(CertificateAuthority.load(join(root, 'nothing'))).rejects.toThrow(/effectgate ca init/);
  });
});
