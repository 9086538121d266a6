import { randomFillSync } from 'node:crypto';

/*
 * RFC 9562 UUIDv7: 48-bit Unix milliseconds, then 74 random bits. Ids sort by creation time, which
 * keeps the primary-key indexes append-mostly and lets listings order by id. Within one
 * millisecond the 12-bit `rand_a` field is used as a counter (RFC 9562 §6.2, method 1) so ids made
 * by one process stay strictly increasing.
 */

let lastMs = -1;
let sequence = 0;
const bytes = new Uint8Array(16);

export function uuidv7(): string {
  let ms = Date.now();
  randomFillSync(bytes);
  if (ms > lastMs) {
    lastMs = ms;
    // Start the counter in the lower half so a burst in one millisecond rarely overflows it.
    sequence = ((bytes[6]! & 0x0f) << 8) | (bytes[7]! & 0x7f);
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
  bytes[0] = Math.floor(ms / 2 ** 40) & 0xff;
  bytes[1] = Math.floor(ms / 2 ** 32) & 0xff;
  bytes[2] = (ms >>> 24) & 0xff;
  bytes[3] = (ms >>> 16) & 0xff;
  bytes[4] = (ms >>> 8) & 0xff;
  bytes[5] = ms & 0xff;
  bytes[6] = 0x70 | ((sequence >>> 8) & 0x0f);
  bytes[7] = sequence & 0xff;
  bytes[8] = 0x80 | (bytes[8]! & 0x3f);
  const hex = Buffer.from(bytes).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
