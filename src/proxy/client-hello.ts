/**
 * Reads the server name (SNI, RFC 6066 §3) out of the first bytes a client sends in a TLS tunnel,
 * without terminating anything: the CONNECT authority is only what the client asked the proxy for,
 * the SNI is the host the TLS session is really for, and both must be routed (docs/design.md §4.2).
 * Pure: bytes in, a verdict out; the caller owns buffering and time limits.
 */

/** TLS record content type `handshake` (RFC 8446 §5.1). */
export const TLS_HANDSHAKE_RECORD = 0x16;

/** The largest ClientHello (all its records, headers included) the proxy buffers to read the SNI. */
export const MAX_CLIENT_HELLO_BYTES = 32 * 1024;

const RECORD_HEADER = 5;
const HANDSHAKE_HEADER = 4;
const CLIENT_HELLO = 1;
const SERVER_NAME_EXTENSION = 0;
const HOST_NAME = 0;
/** A DNS name as SNI carries it: A-labels only (RFC 6066 §3), at most 253 characters plus a dot. */
const HOST_NAME_SYNTAX =
  /^[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?)*\.?$/;

export type ClientHelloResult =
  /** More bytes are needed before anything can be said. */
  | { readonly kind: 'incomplete' }
  /** A complete ClientHello; `serverName` is `null` when it carries no SNI (e.g. an IP literal). */
  | { readonly kind: 'hello'; readonly serverName: string | null }
  /** Not a ClientHello the proxy can read (malformed, or larger than it buffers). */
  | { readonly kind: 'invalid'; readonly reason: string };

const INCOMPLETE: ClientHelloResult = Object.freeze({ kind: 'incomplete' });

/**
 * Parses the ClientHello at the start of `bytes` (which begin with a handshake record). A
 * ClientHello may span several records; their fragments are joined until the handshake message is
 * whole.
 */
export function parseClientHello(bytes: Buffer): ClientHelloResult {
  // The announced size is known from the first record's first bytes: refuse an oversized hello
  // before buffering it.
  if (bytes.length >= RECORD_HEADER + HANDSHAKE_HEADER && bytes[0] === TLS_HANDSHAKE_RECORD) {
    if (bytes[RECORD_HEADER] !== CLIENT_HELLO)
      return invalid('the first handshake message is not a ClientHello');
    if (HANDSHAKE_HEADER + bytes.readUIntBE(RECORD_HEADER + 1, 3) > MAX_CLIENT_HELLO_BYTES) {
      return invalid('the ClientHello is larger than the gate reads');
    }
  }
  const fragments: Buffer[] = [];
  let handshakeBytes = 0;
  let offset = 0;
  let needed: number | null = null;
  while (needed === null || handshakeBytes < needed) {
    if (offset + RECORD_HEADER > bytes.length) return tooLargeOr(bytes, offset + RECORD_HEADER);
    if (bytes[offset] !== TLS_HANDSHAKE_RECORD)
      return invalid('the handshake is interrupted by another record type');
    const length = bytes.readUInt16BE(offset + 3);
    if (length === 0) return invalid('an empty handshake record');
    const end = offset + RECORD_HEADER + length;
    if (end > bytes.length) return tooLargeOr(bytes, end);
    fragments.push(bytes.subarray(offset + RECORD_HEADER, end));
    handshakeBytes += length;
    offset = end;
    if (needed === null && handshakeBytes >= HANDSHAKE_HEADER) {
      const head = fragments.length === 1 ? fragments[0]! : Buffer.concat(fragments);
      if (head[0] !== CLIENT_HELLO) return invalid('the first handshake message is not a ClientHello');
      needed = HANDSHAKE_HEADER + head.readUIntBE(1, 3);
      if (needed > MAX_CLIENT_HELLO_BYTES) return invalid('the ClientHello is larger than the gate reads');
    }
  }
  const message = fragments.length === 1 ? fragments[0]! : Buffer.concat(fragments);
  return readServerName(message.subarray(HANDSHAKE_HEADER, needed));
}

/** The `server_name` extension of a ClientHello body (RFC 8446 §4.1.2, RFC 6066 §3). */
function readServerName(body: Buffer): ClientHelloResult {
  const reader = new Reader(body);
  reader.skip(2 + 32); // legacy_version, random
  reader.skip(reader.u8()); // legacy_session_id
  reader.skip(reader.u16()); // cipher_suites
  reader.skip(reader.u8()); // legacy_compression_methods
  if (reader.failed) return invalid('a truncated ClientHello');
  // TLS 1.2 allows a ClientHello without extensions; then there is no SNI.
  if (reader.remaining === 0) return { kind: 'hello', serverName: null };
  const extensions = reader.sub(reader.u16());
  while (!reader.failed && extensions.remaining > 0) {
    const type = extensions.u16();
    const data = extensions.sub(extensions.u16());
    if (extensions.failed) break;
    if (type !== SERVER_NAME_EXTENSION) continue;
    const list = data.sub(data.u16());
    while (!list.failed && list.remaining > 0) {
      const nameType = list.u8();
      const name = list.bytes(list.u16());
      if (list.failed || name === null) break;
      if (nameType !== HOST_NAME) continue;
      const text = name.toString('latin1');
      if (text.length === 0 || text.length > 254 || !HOST_NAME_SYNTAX.test(text)) {
        return invalid('the SNI host name is not a DNS name');
      }
      return { kind: 'hello', serverName: text };
    }
    if (list.failed) return invalid('a malformed server_name extension');
    return { kind: 'hello', serverName: null };
  }
  if (reader.failed || extensions.failed) return invalid('malformed ClientHello extensions');
  return { kind: 'hello', serverName: null };
}

function tooLargeOr(bytes: Buffer, wanted: number): ClientHelloResult {
  if (wanted > MAX_CLIENT_HELLO_BYTES || bytes.length >= MAX_CLIENT_HELLO_BYTES) {
    return invalid('the ClientHello is larger than the gate reads');
  }
  return INCOMPLETE;
}

function invalid(reason: string): ClientHelloResult {
  return { kind: 'invalid', reason };
}

/** A bounds-checked cursor: any read past the end sets `failed` instead of throwing. */
class Reader {
  readonly #buf: Buffer;
  #at = 0;
  failed = false;

  constructor(buf: Buffer) {
    this.#buf = buf;
  }

  get remaining(): number {
    return this.#buf.length - this.#at;
  }

  u8(): number {
    if (!this.#take(1)) return 0;
    return this.#buf[this.#at - 1]!;
  }

  u16(): number {
    if (!this.#take(2)) return 0;
    return this.#buf.readUInt16BE(this.#at - 2);
  }

  skip(n: number): void {
    this.#take(n);
  }

  bytes(n: number): Buffer | null {
    if (!this.#take(n)) return null;
    return this.#buf.subarray(this.#at - n, this.#at);
  }

  /** A reader over the next `n` bytes (failed, and empty, when they are not there). */
  sub(n: number): Reader {
    const part = this.bytes(n);
    const reader = new Reader(part ?? Buffer.alloc(0));
    reader.failed = part === null;
    return reader;
  }

  #take(n: number): boolean {
    if (this.failed || this.#at + n > this.#buf.length) {
      this.failed = true;
      return false;
    }
    this.#at += n;
    return true;
  }
}
