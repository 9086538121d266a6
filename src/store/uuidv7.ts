import { randomFillSync } from 'node:crypto';

/*
 * RFC 9562 UUIDv7: 48-bit Unix milliseconds, then 74 random bits. Ids sort by creation time, which
 * keeps the primary-key indexes append-mostly and lets listings order by id. Within one
 * millisecond the 12-bit `rand_a` field is used as a counter (RFC 9562 §6.2, method 1) so ids made
 * by one process stay strictly increasing.
 *
 * Three ids per governed allow: random bytes are drawn from the CSPRNG 4 KiB at a time (one call
 * per 409 ids instead of one per id) and formatted through a byte -> hex table.
 */

const POOL_BYTES = 4096;
// rand_a seed (2 bytes) and rand_b (8 bytes, 62 bits used).
const ID_BYTES = 10;
const pool = new Uint8Array(POOL_BYTES);
let poolAt = POOL_BYTES;
const HEX: readonly string[] = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'));

let lastMs = -1;
let sequence = 0;

export function uuidv7(): string {
  if (poolAt + ID_BYTES > POOL_BYTES) {
    randomFillSync(pool);
    poolAt = 0;
  }
  const r = poolAt;
  poolAt += ID_BYTES;
  let ms = Date.now();
  if (ms > lastMs) {
    lastMs = ms;
    // Start the counter in the lower half so a burst in one millisecond rarely overflows it.
    sequence = ((pool[r]! & 0x0f) << 8) | (pool[r + 1]! & 0x7f);
  } else {
    // Same millisecond (or the clock stepped back): keep counting from the last id's time.
    ms = lastMs;
    sequence += 1;
    if (sequence > 0xfff) {
      lastMs += 1;
      ms = lastMs;
      sequence = 0;
    }
  }
  const high = Math.floor(ms / 2 ** 32);
  const h = (b: number): string => HEX[b & 0xff]!;
  return (
    h(high >>> 8) +
    h(high) +
    h(ms >>> 24) +
    h(ms >>> 16) +
    '-' +
    h(ms >>> 8) +
    h(ms) +
    '-' +
    h(0x70 | (sequence >>> 8)) +
    h(sequence) +
    '-' +
    h(0x80 | (pool[r + 2]! & 0x3f)) +
    h(pool[r + 3]!) +
    '-' +
    h(pool[r + 4]!) +
    h(pool[r + 5]!) +
    h(pool[r + 6]!) +
    h(pool[r + 7]!) +
    h(pool[r + 8]!) +
    h(pool[r + 9]!)
  );
}
