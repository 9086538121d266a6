import { describe, expect, it } from 'vitest';
import { PolicyError, type PolicyIssue } from '../../../src/errors.js';
import { IpRange, parseIp, parsePolicyFiles } from '../../../src/policy/index.js';

const never = (): boolean => false;

function range(text: string): IpRange {
  const r = IpRange.parse(text);
  if (typeof r === 'string') throw new Error(r);
  return r;
}

function contains(cidr: string, address: string): boolean {
  const ip = parseIp(address);
  if (ip === null) throw new Error(`not an address: ${address}`);
  return range(cidr).contains(ip);
}

function load(...texts: string[]): ReturnType<typeof parsePolicyFiles> {
  return parsePolicyFiles(texts.map((text, i) => ({ file: `p${i}.yaml`, text })));
}

function issues(...texts: string[]): PolicyIssue[] {
  try {
    load(...texts);
  } catch (err) {
    if (err instanceof PolicyError) return [...err.issues];
    throw err;
  }
  throw new Error('expected a PolicyError');
}

const refusal = (set: ReturnType<typeof load>, address: string, host = address, port = 80): string | null =>
  set.egress.refusal({ host, address, port }, never);

describe('CIDR matching', () => {
  it('matches IPv4 and IPv6 blocks, and nothing of the other family', () => {
    expect(contains('10.0.0.0/8', '10.255.1.2')).toBe(true);
    expect(contains('10.0.0.0/8', '11.0.0.1')).toBe(false);
    expect(contains('172.16.0.0/12', '172.31.255.255')).toBe(true);
    expect(contains('172.16.0.0/12', '172.32.0.0')).toBe(false);
    expect(contains('fe80::/10', 'fe80::1')).toBe(true);
    expect(contains('fe80::/10', 'fec0::1')).toBe(false);
    expect(contains('0.0.0.0/0', '8.8.8.8')).toBe(true);
    expect(contains('0.0.0.0/0', '::1')).toBe(false);
    expect(contains('127.0.0.1', '127.0.0.1')).toBe(true);
    expect(contains('127.0.0.1', '127.0.0.2')).toBe(false);
  });

  it('reads IPv4-mapped IPv6 as the IPv4 address it reaches', () => {
    expect(contains('169.254.0.0/16', '::ffff:169.254.169.254')).toBe(true);
    expect(contains('169.254.0.0/16', '::ffff:a9fe:a9fe')).toBe(true);
    expect(contains('::ffff:10.0.0.0/104', '10.1.2.3')).toBe(true);
  });

  it('rejects bad blocks with a reason', () => {
    expect(IpRange.parse('10.0.0.0/33')).toMatch(/prefix length/);
    expect(IpRange.parse('10.0.0.1/8')).toMatch(/host bits set.*10\.0\.0\.0\/8/);
    expect(IpRange.parse('nope/8')).toMatch(/not an IPv4 or IPv6 address/);
  });
});

describe('egress classes and defaults', () => {
  it('defaults to deny [link_local, gate] and leaves loopback and private alone', () => {
    const set = load('version: 1\ntools: []\n');
    expect(set.egress.deny).toEqual(['link_local', 'gate']);
    expect(set.egress.allow).toEqual([]);
    expect(refusal(set, '169.254.169.254')).toMatch(/link-local/);
    expect(refusal(set, 'fe80::1')).toMatch(/link-local/);
    expect(refusal(set, 'fd00:ec2::254')).toMatch(/link-local/);
    expect(refusal(set, '::ffff:169.254.169.254')).toMatch(/link-local/);
    expect(refusal(set, '127.0.0.1')).toBeNull();
    expect(refusal(set, '::1')).toBeNull();
    expect(refusal(set, '10.0.0.1')).toBeNull();
  });

  it('asks about the gate class with the address and port', () => {
    const set = load('version: 1\ntools: []\n');
    const gate = (address: string, port: number): boolean => address === '127.0.0.1' && port === 9000;
    expect(set.egress.refusal({ host: 'localhost', address: '127.0.0.1', port: 9000 }, gate)).toMatch(
      /gate's own listeners/,
    );
    expect(set.egress.refusal({ host: 'localhost', address: '127.0.0.1', port: 9001 }, gate)).toBeNull();
  });

  it('denies loopback, private and CIDRs when asked, and exempts allow CIDRs and names', () => {
    const set = load(
      'version: 1\negress:\n  deny: [loopback, private, 192.0.2.0/24]\n  allow: [127.0.0.1/32, internal.example]\ntools: []\n',
    );
    expect(refusal(set, '127.0.0.2')).toMatch(/loopback/);
    expect(refusal(set, '::1')).toMatch(/loopback/);
    expect(refusal(set, '127.0.0.1')).toBeNull();
    expect(refusal(set, '100.64.0.1')).toMatch(/private/);
    expect(refusal(set, 'fc00::1')).toMatch(/private/);
    expect(refusal(set, '192.0.2.7')).toMatch(/192\.0\.2\.0\/24/);
    expect(refusal(set, '10.1.1.1', 'Internal.Example.')).toBeNull();
    // Link-local is no longer denied: the list replaces the default.
    expect(refusal(set, '169.254.169.254')).toBeNull();
  });

  it('deny: [] turns the check off', () => {
    const set = load('version: 1\negress: { deny: [] }\ntools: []\n');
    expect(refusal(set, '169.254.169.254')).toBeNull();
  });

  it('is frozen', () => {
    const set = load('version: 1\ntools: []\n');
    expect(Object.isFrozen(set.egress)).toBe(true);
    expect(Object.isFrozen(set.egress.deny)).toBe(true);
  });
});

describe('egress errors', () => {
  it('reports bad entries with file:line:column', () => {
    const found = issues(
      'version: 1\negress:\n  deny: [link-local, 10.0.0.1/8]\n  allow: ["*.example.com", 300.1.1.1/8]\n  deni: []\ntools: []\n',
    );
    expect(found.map((i) => `${i.file}:${i.line}:${i.column} ${i.field}`)).toEqual([
      'p0.yaml:3:10 egress.deny[0]',
      'p0.yaml:3:22 egress.deny[1]',
      'p0.yaml:4:11 egress.allow[0]',
      'p0.yaml:4:28 egress.allow[1]',
      'p0.yaml:5:3 egress.deni',
    ]);
    expect(found[0]!.message).toMatch(/expected one of link_local, loopback, private, gate or a CIDR/);
    expect(found[1]!.message).toMatch(/host bits set/);
    expect(found[2]!.message).toMatch(/wildcards/);
    expect(found[4]!.message).toMatch(/did you mean "deny"/);
  });

  it('refuses two files that declare different egress blocks, naming both', () => {
    const found = issues(
      'version: 1\negress: { deny: [link_local, gate] }\ntools: []\n',
      'version: 1\negress: { deny: [link_local, gate, loopback] }\ntools: []\n',
    );
    expect(found).toEqual([
      expect.objectContaining({
        file: 'p1.yaml',
        line: 2,
        field: 'egress',
        message: expect.stringContaining('p0.yaml:2'),
      }),
    ]);
  });

  it('accepts files that agree (order aside) or leave egress out', () => {
    const set = load(
      'version: 1\negress: { deny: [gate, loopback] }\ntools: []\n',
      'version: 1\ntools: []\n',
      'version: 1\negress: { deny: [loopback, gate], allow: [] }\ntools: []\n',
    );
    expect(set.egress.deny).toEqual(['gate', 'loopback']);
  });
});
