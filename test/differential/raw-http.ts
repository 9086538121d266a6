/**
 * Requests as bytes: the differential suite must send exactly the spelling it generated (a client
 * library would normalise the path, fix the Content-Length or refuse a lower-case method), to an
 * oracle directly (origin form) or through the gate (absolute form).
 */
import { connect } from 'node:net';

export interface RawRequest {
  readonly method: string;
  /** Origin-form target: path and query, sent as is. */
  readonly target: string;
  /** In order, names as written; Host and Content-Length are added by `toBytes`. */
  readonly headers: readonly (readonly [string, string])[];
  readonly body: Buffer;
}

export interface RawResponse {
  readonly status: number;
  /** Lower-case names; a repeated header keeps its last value. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

/** The request's bytes, to `authority`; `absolute` writes the target in absolute form (a proxy). */
export function toBytes(request: RawRequest, authority: string, absolute: boolean): Buffer {
  const target = absolute ? `http://${authority}${request.target}` : request.target;
  const lines = [`${request.method} ${target} HTTP/1.1`, `Host: ${authority}`];
  for (const [name, value] of request.headers) lines.push(`${name}: ${value}`);
  if (!request.headers.some(([n]) => n.toLowerCase() === 'transfer-encoding')) {
    lines.push(`Content-Length: ${request.body.byteLength}`);
  }
  lines.push('Connection: close', '', '');
  return Buffer.concat([Buffer.from(lines.join('\r\n'), 'latin1'), request.body]);
}

/** Sends `bytes` to 127.0.0.1:`port` and reads the answer to the close (bounded by `timeoutMs`). */
export function sendRaw(port: number, bytes: Buffer, timeoutMs = 20_000): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (err) => {
      clearTimeout(timer);
      // A reset after a complete answer is still that answer.
      // A reset with or without an answer: what came, or no answer (status 0).
      void err;
      resolve(tryParse(Buffer.concat(chunks)) ?? NO_ANSWER);
    });
    socket.on('end', () => {
      clearTimeout(timer);
      // A server that closes without an answer performed nothing the client could learn of.
      resolve(tryParse(Buffer.concat(chunks)) ?? NO_ANSWER);
    });
    socket.write(bytes);
  });
}

/** The connection closed before a complete response head (status 0). */
const NO_ANSWER: RawResponse = Object.freeze({ status: 0, headers: {}, body: Buffer.alloc(0) });

function tryParse(data: Buffer): RawResponse | null {
  const end = data.indexOf('\r\n\r\n');
  if (end === -1) return null;
  const head = data.subarray(0, end).toString('latin1').split('\r\n');
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(head[0] ?? '');
  if (status === null) return null;
  const headers: Record<string, string> = {};
  for (const line of head.slice(1)) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body = data.subarray(end + 4);
  if (headers['transfer-encoding']?.toLowerCase().includes('chunked')) body = dechunk(body);
  else if (headers['content-length'] !== undefined)
    body = body.subarray(0, Number(headers['content-length']));
  return { status: Number(status[1]), headers, body };
}

function dechunk(data: Buffer): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  for (let guard = 0; guard < 100_000; guard++) {
    const lineEnd = data.indexOf('\r\n', at);
    if (lineEnd === -1) break;
    const size = Number.parseInt(data.subarray(at, lineEnd).toString('latin1'), 16);
    if (!Number.isFinite(size) || size === 0) break;
    out.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
  return Buffer.concat(out);
}

/** A ready-to-paste form of the request: the raw bytes as a printf | nc line. */
export function pasteable(request: RawRequest, authority: string): string {
  const bytes = toBytes(request, authority, false).toString('latin1');
  const escaped = bytes
    .replace(/%/g, '%%')
    .replace(/\\/g, '\\\\')
    .replace(/'/g, "'\\''")
    .replace(/\r/g, '\\r')
    .replace(/\n/g, '\\n');
  const [host, port] = authority.split(':');
  return `printf '${escaped}' | nc ${host} ${port}`;
}
