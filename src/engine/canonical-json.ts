import { createHmac, hash } from 'node:crypto';

/**
 * RFC 8785 JSON Canonicalization Scheme: object members sorted by UTF-16 code units, no
 * insignificant whitespace, strings and numbers serialized as ECMAScript's JSON.stringify does
 * (which is exactly what JCS specifies, §3.2.2). Used for duplicate keys and request fingerprints,
 * so two semantically equal arguments hash the same whatever their key order or spacing.
 *
 * @example
 * canonicalJson({ b: 1, a: [true, 'x'] }) // '{"a":[true,"x"],"b":1}'
 */
export function canonicalJson(value: unknown): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError('canonical JSON cannot represent a non-finite number');
      return JSON.stringify(value);
    case 'object': {
      if (Array.isArray(value)) {
        return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
      }
      // Default sort compares UTF-16 code units, which is what RFC 8785 §3.2.3 asks for.
      const keys = Object.keys(value).sort();
      const parts: string[] = [];
      for (const k of keys) {
        const v = (value as Record<string, unknown>)[k];
        if (v === undefined) continue;
        parts.push(`${JSON.stringify(k)}:${canonicalJson(v)}`);
      }
      return `{${parts.join(',')}}`;
    }
    default:
      throw new TypeError(`canonical JSON cannot represent a ${typeof value}`);
  }
}

/**
 * `sha256:<hex>` of the UTF-8 bytes of `text` (or raw bytes). The one-shot `hash` makes no Hash
 * object: a governed allow takes three or four of these.
 */
export function sha256Ref(data: string | Uint8Array): string {
  return `sha256:${hash('sha256', data, 'hex')}`;
}

/** `hmac-sha256:<hex>`: a keyed fingerprint, so a low-entropy secret cannot be brute-forced from the trail. */
export function hmacRef(key: string | Uint8Array, data: string): string {
  return `hmac-sha256:${createHmac('sha256', key).update(data).digest('hex').slice(0, 32)}`;
}
