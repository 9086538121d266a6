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
 */
export function writeRawResponse(socket: Duplex, response: GateResponse): void {
  if (socket.destroyed || !socket.writable) {
    socket.destroy();
    return;
  }
  const lines = [`HTTP/1.1 ${response.status} ${STATUS_CODES[response.status] ?? 'Unknown'}`];
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
