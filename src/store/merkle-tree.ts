import { createHash } from 'node:crypto';

/**
 * The Merkle tree of RFC 9162 §2.1 (Certificate Transparency 2.0), with SHA-256: a leaf is hashed
 * as SHA-256(0x00 || data), an interior node as SHA-256(0x01 || left || right), so no leaf can pass
 * for a node. The tree of n leaves splits at the largest power of two below n, which makes every
 * earlier tree a prefix of every later one: what consistency and inclusion proofs rely on.
 */

const LEAF_PREFIX = Buffer.from([0x00]);
const NODE_PREFIX = Buffer.from([0x01]);

/** The hash of one leaf: SHA-256(0x00 || data); a string is hashed as its UTF-8 bytes. */
export function leafHash(data: string | Uint8Array): Buffer {
  return createHash('sha256').update(LEAF_PREFIX).update(data).digest();
}

/** The hash of an interior node: SHA-256(0x01 || left || right). */
export function nodeHash(left: Uint8Array, right: Uint8Array): Buffer {
  return createHash('sha256').update(NODE_PREFIX).update(left).update(right).digest();
}

/** The root of the empty tree: SHA-256 of nothing. */
export const EMPTY_ROOT_HEX: string = createHash('sha256').digest('hex');

/**
 * The reference Merkle Tree Hash (MTH) of a list of leaf hashes, as RFC 9162 §2.1.1 defines it:
 * the recursive split at the largest power of two smaller than n. O(n); the frontier below gives
 * the same root incrementally, and this is what it is tested against.
 */
export function merkleRoot(leafHashes: readonly Uint8Array[]): Buffer {
  if (leafHashes.length === 0) return Buffer.from(EMPTY_ROOT_HEX, 'hex');
  return subtreeRoot(leafHashes, 0, leafHashes.length);
}

function subtreeRoot(leaves: readonly Uint8Array[], start: number, end: number): Buffer {
  const n = end - start;
  if (n === 1) return Buffer.from(leaves[start]!);
  let k = 1;
  while (k * 2 < n) k *= 2;
  return nodeHash(subtreeRoot(leaves, start, start + k), subtreeRoot(leaves, start + k, end));
}

/** A frontier that is not one: the message says what is wrong with it. */
export class MerkleFrontierError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MerkleFrontierError';
  }
}

const HASH_HEX = /^[0-9a-f]{64}$/;

/**
 * The compact range [0, size) of the tree: the roots of its perfect subtrees, one per set bit of
 * size, biggest first (for size 6 = 4 + 2: the root of leaves 0-3, then of leaves 4-5). That is
 * all a sealer needs to keep to append and to compute the root, O(log n) each, without reading
 * earlier leaves again.
 */
export class MerkleFrontier {
  #size: number;
  readonly #hashes: Buffer[];

  private constructor(size: number, hashes: Buffer[]) {
    this.#size = size;
    this.#hashes = hashes;
  }

  static empty(): MerkleFrontier {
    return new MerkleFrontier(0, []);
  }

  /** The frontier `toJSON` wrote; anything else (a wrong key, count or hash) is refused. */
  static fromJSON(text: string): MerkleFrontier {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      throw new MerkleFrontierError(`A Merkle frontier is not JSON: ${(err as Error).message}`);
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw new MerkleFrontierError('A Merkle frontier must be a JSON object {"size":N,"hashes":[...]}.');
    }
    const keys = Object.keys(value).sort();
    if (keys.length !== 2 || keys[0] !== 'hashes' || keys[1] !== 'size') {
      throw new MerkleFrontierError(
        `A Merkle frontier has exactly the members size and hashes, not ${JSON.stringify(Object.keys(value))}.`,
      );
    }
    const { size, hashes } = value as { size: unknown; hashes: unknown };
    if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) {
      throw new MerkleFrontierError(
        `A Merkle frontier's size must be a non-negative integer, not ${JSON.stringify(size)}.`,
      );
    }
    if (!Array.isArray(hashes) || hashes.length !== popcount(size)) {
      throw new MerkleFrontierError(
        `A Merkle frontier of size ${size} holds ${popcount(size)} hashes (one per set bit of the size), not ${Array.isArray(hashes) ? hashes.length : JSON.stringify(hashes)}.`,
      );
    }
    const buffers = hashes.map((h: unknown, i) => {
      if (typeof h !== 'string' || !HASH_HEX.test(h)) {
        throw new MerkleFrontierError(`A Merkle frontier's hashes[${i}] is not 64 lowercase hex digits.`);
      }
      return Buffer.from(h, 'hex');
    });
    return new MerkleFrontier(size, buffers);
  }

  /** The number of leaves appended so far. */
  get size(): number {
    return this.#size;
  }

  /** Appends one leaf (its hash, `leafHash(data)`): merges the equal-sized subtrees it completes. */
  append(leafHash: Uint8Array): void {
    if (leafHash.length !== 32)
      throw new MerkleFrontierError(`A leaf hash is 32 bytes, not ${leafHash.length}.`);
    if (this.#size >= Number.MAX_SAFE_INTEGER) throw new MerkleFrontierError('The Merkle tree is full.');
    let hash: Buffer = Buffer.from(leafHash);
    // Each low set bit of the size is a subtree as big as the one being carried: merge, like a
    // binary counter's carry.
    for (let n = this.#size; n % 2 === 1; n = (n - 1) / 2) {
      hash = nodeHash(this.#hashes.pop()!, hash);
    }
    this.#hashes.push(hash);
    this.#size += 1;
  }

  /** The RFC 9162 root of the leaves so far: the subtrees folded from the smallest up. */
  root(): Buffer {
    if (this.#hashes.length === 0) return Buffer.from(EMPTY_ROOT_HEX, 'hex');
    let root = this.#hashes[this.#hashes.length - 1]!;
    for (let i = this.#hashes.length - 2; i >= 0; i--) root = nodeHash(this.#hashes[i]!, root);
    return Buffer.from(root);
  }

  clone(): MerkleFrontier {
    return new MerkleFrontier(
      this.#size,
      this.#hashes.map((h) => Buffer.from(h)),
    );
  }

  /** `{"size":N,"hashes":["<hex>",...]}`, always in this form, biggest subtree first. */
  toJSON(): string {
    return JSON.stringify({ size: this.#size, hashes: this.#hashes.map((h) => h.toString('hex')) });
  }
}

/** The number of set bits of a non-negative safe integer (beyond 32 bits, so no bitwise operators). */
function popcount(n: number): number {
  let count = 0;
  for (let m = n; m > 0; m = Math.floor(m / 2)) count += m % 2;
  return count;
}
