/**
 * The gate's own header namespace (docs/design.md §4.2): `Effectgate-*` request fields are context for
 * the gate and never reach a destination; `Effectgate-*` response fields are the gate's word
 * (verdict, decision, operation, attempt, warning), so a destination may never speak in it: every
 * front door drops them from upstream responses, governed or not, before adding its own.
 */
export const GATE_HEADER_PREFIX = 'effectgate-';

/** Whether a header name (any case) is in the gate's namespace. */
export function isGateHeader(name: string): boolean {
  return (
    name.length >= GATE_HEADER_PREFIX.length &&
    name.slice(0, GATE_HEADER_PREFIX.length).toLowerCase() === GATE_HEADER_PREFIX
  );
}

/**
 * `headers` without any `Effectgate-*` field; the same object when there is none (the common case:
 * no copy on the hot path).
 */
export function withoutGateHeaders<V>(headers: Readonly<Record<string, V>>): Readonly<Record<string, V>> {
  let found = false;
  for (const name in headers) {
    if (isGateHeader(name)) {
      found = true;
      break;
    }
  }
  if (!found) return headers;
  const out: Record<string, V> = {};
  for (const name in headers) if (!isGateHeader(name)) out[name] = headers[name] as V;
  return out;
}

/** Raw `[name, value, name, value, …]` header arrays (node:http rawHeaders, undici) without them. */
export function rawWithoutGateHeaders<T>(raw: readonly T[]): T[] {
  const out: T[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (!isGateHeader(String(raw[i]))) out.push(raw[i] as T, raw[i + 1] as T);
  }
  return out;
}
