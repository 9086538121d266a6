import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  EMPTY_ROOT_HEX,
  leafHash,
  MerkleFrontier,
  MerkleFrontierError,
  merkleRoot,
  nodeHash,
} from '../../../src/store/merkle-tree.js';

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

// The RFC 6962 test tree of transparency-dev/merkle (testonly/constants.go): its eight leaf
// inputs, the root of every tree size 0-8, and the compact range ("CompactTrees") of each size.
const LEAF_INPUTS = [
  '',
  '00',
  '10',
  '2021',
  '3031',
  '40414243',
  '5051525354555657',
  '606162636465666768696a6b6c6d6e6f',
].map((h) => Buffer.from(h, 'hex'));

const ROOTS = [
  'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
  '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
  'fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125',
  'aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77',
  'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
  '4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4',
  '76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef',
  'ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c',
  '5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328',
];

const NODES = [
  [
    '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
    '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7',
    '0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7',
    '07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7',
    'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b',
    '4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658',
    'b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f',
    '46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1',
  ],
  [
    'fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125',
    '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
    '0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a',
    'ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0',
  ],
  [
    'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
    '6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4',
  ],
  ['5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328'],
] as const;

const n = (level: number, index: number): string => NODES[level]![index]!;
const COMPACT_RANGES: readonly (readonly string[])[] = [
  [],
  [n(0, 0)],
  [n(1, 0)],
  [n(1, 0), n(0, 2)],
  [n(2, 0)],
  [n(2, 0), n(0, 4)],
  [n(2, 0), n(1, 2)],
  [n(2, 0), n(1, 2), n(0, 6)],
  [n(3, 0)],
];

describe('RFC 9162 hashing', () => {
  // transparency-dev/merkle rfc6962/rfc6962_test.go
  it('hashes leaves and nodes with their domain-separation prefixes', () => {
    expect(EMPTY_ROOT_HEX).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(hex(leafHash(new Uint8Array()))).toBe(
      '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
    );
    expect(hex(leafHash('L123456'))).toBe('395aa064aa4c29f7010acfe3f25db9485bbd4b91897b6ad7ad547639252b4d56');
    expect(hex(nodeHash(Buffer.from('N123'), Buffer.from('N456')))).toBe(
      'aa217fe888e47007fa15edab33c2b492a722cb106c64667fc2b044444de66bbb',
    );
  });

  it('hashes a string as its UTF-8 bytes', () => {
    expect(leafHash('é✓')).toEqual(leafHash(Buffer.from('é✓', 'utf8')));
  });

  it('gives the known leaf hashes, roots and compact ranges of the RFC 6962 test tree', () => {
    const leaves = LEAF_INPUTS.map((d) => leafHash(d));
    expect(leaves.map(hex)).toEqual(NODES[0]);
    const frontier = MerkleFrontier.empty();
    for (let size = 0; size <= LEAF_INPUTS.length; size++) {
      expect(hex(merkleRoot(leaves.slice(0, size))), `merkleRoot of ${size}`).toBe(ROOTS[size]);
      expect(hex(frontier.root()), `frontier root of ${size}`).toBe(ROOTS[size]);
      expect(JSON.parse(frontier.toJSON())).toEqual({ size, hashes: COMPACT_RANGES[size] });
      if (size < leaves.length) frontier.append(leaves[size]!);
    }
  });
});

describe('MerkleFrontier', () => {
  it('has the root merkleRoot computes, for every size 0-70 of random leaves', () => {
    const leaves = Array.from({ length: 70 }, () => leafHash(randomBytes(1 + (randomBytes(1)[0]! % 40))));
    const frontier = MerkleFrontier.empty();
    for (let size = 0; size <= leaves.length; size++) {
      expect(frontier.size).toBe(size);
      expect(hex(frontier.root()), `size ${size}`).toBe(hex(merkleRoot(leaves.slice(0, size))));
      const hashes = (JSON.parse(frontier.toJSON()) as { hashes: string[] }).hashes;
      expect(hashes.length).toBe(size.toString(2).replaceAll('0', '').length);
      if (size < leaves.length) frontier.append(leaves[size]!);
    }
  });

  it('round-trips through JSON byte for byte, and a clone grows apart from its original', () => {
    const frontier = MerkleFrontier.empty();
    expect(frontier.toJSON()).toBe('{"size":0,"hashes":[]}');
    for (let i = 0; i < 13; i++) frontier.append(leafHash(`leaf ${i}`));
    const text = frontier.toJSON();
    const read = MerkleFrontier.fromJSON(text);
    expect(read.toJSON()).toBe(text);
    expect(read.size).toBe(13);
    expect(read.root()).toEqual(frontier.root());
    // A reformatted copy (as a jsonb column would give it back) reads the same.
    expect(MerkleFrontier.fromJSON(JSON.stringify(JSON.parse(text), null, 1)).toJSON()).toBe(text);

    const copy = frontier.clone();
    copy.append(leafHash('leaf 13'));
    read.append(leafHash('leaf 13'));
    expect(frontier.size).toBe(13);
    expect(frontier.toJSON()).toBe(text);
    expect(copy.root()).toEqual(read.root());
    expect(copy.root()).not.toEqual(frontier.root());
  });

  it('does not let the root it returned, or the leaf it was given, change it', () => {
    const frontier = MerkleFrontier.empty();
    const leaf = leafHash('a');
    frontier.append(leaf);
    leaf.fill(0);
    frontier.root().fill(0);
    expect(hex(frontier.root())).toBe(hex(leafHash('a')));
  });

  it('refuses a leaf hash that is not 32 bytes', () => {
    expect(() => MerkleFrontier.empty().append(new Uint8Array(31))).toThrow(MerkleFrontierError);
  });

  const h = createHash('sha256').update('x').digest('hex');
  it.each([
    ['not JSON', '{size:1}'],
    ['an array', `[1,["${h}"]]`],
    ['null', 'null'],
    ['a missing member', `{"size":1}`],
    ['an extra member', `{"size":1,"hashes":["${h}"],"root":"${h}"}`],
    ['a negative size', '{"size":-1,"hashes":[]}'],
    ['a fractional size', `{"size":1.5,"hashes":["${h}"]}`],
    ['a size as a string', `{"size":"1","hashes":["${h}"]}`],
    ['an unsafe size', `{"size":9007199254740992,"hashes":["${h}"]}`],
    ['too few hashes', `{"size":3,"hashes":["${h}"]}`],
    ['too many hashes', `{"size":4,"hashes":["${h}","${h}"]}`],
    ['hashes not a list', `{"size":1,"hashes":"${h}"}`],
    ['an uppercase hash', `{"size":1,"hashes":["${h.toUpperCase()}"]}`],
    ['a short hash', `{"size":1,"hashes":["${h.slice(2)}"]}`],
    ['a number as a hash', '{"size":1,"hashes":[1]}'],
  ])('fromJSON refuses %s', (_what, text) => {
    expect(() => MerkleFrontier.fromJSON(text)).toThrow(MerkleFrontierError);
  });

  it('reads a frontier of a size past 32 bits', () => {
    const size = 2 ** 40 + 5;
    const text = JSON.stringify({ size, hashes: [h, h, h] });
    expect(MerkleFrontier.fromJSON(text).toJSON()).toBe(text);
  });
});
