/**
 * Writes a gate-made response onto a raw socket (CONNECT and upgrade requests, `clientError`),
 * where there is no `ServerResponse` to write to.
 */
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { GateResponse } from '../engine/index.js';

/**
 * Serializes a complete response onto a raw socket (CONNECT and upgrade requests, `clientError`)
 * and closes it: after such an answer the connection's state is unknown, so it is never reused.
 * `titleAsReason`: the status line's reason phrase is the problem's `title` (a refused CONNECT:
 * many clients show only its status line, never its body, e.g. Python's `Tunnel connection
 * failed: 403 CONNECT port not allowed`).
 */
export function writeRawResponse(
  socket: Duplex,
  response: GateResponse,
  options: { readonly titleAsReason?: boolean } = {},
): void {
  if (socket.destroyed || !socket.writable) {
    socket.destroy();
    return;
  }
  const title = options.titleAsReason === true ? problemTitle(response) : null;
  const lines = [`HTTP/1.1 ${response.status} ${title ?? STATUS_CODES[response.status] ?? 'Unknown'}`];
  for (const [name, value] of Object.entries(response.headers)) {
    const lower = name.toLowerCase();
    if (lower === 'content-length' || lower === 'connection' || lower === 'transfer-encoding') continue;
    for (const v of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${v}`);
  }
  lines.push(`content-length: ${response.body.byteLength}`, 'connection: close');
  const head = Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
  socket.end(Buffer.concat([head, response.body]));
  // Bytes the client keeps sending would otherwise hold the socket open; give the answer a moment
  // to leave, then let go whatever happens.
  const timer = setTimeout(() => socket.destroy(), 2_000);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
  socket.resume();
}

/** A problem+json body's `title`, as a reason phrase (RFC 9112 §4: tab, space, visible ASCII). */
function problemTitle(response: GateResponse): string | null {
  const type = response.headers['content-type'];
  if (typeof type !== 'string' || !type.startsWith('application/problem+json')) return null;
  try {
    const body = JSON.parse(Buffer.from(response.body).toString('utf8')) as { title?: unknown };
    if (typeof body.title !== 'string') return null;
    const phrase = body.title
      .replace(/[^\t\x20-\x7e]/g, ' ')
      .slice(0, 120)
      .trim();
    return phrase === '' ? null : phrase;
  } catch {
    return null;
  }
}
