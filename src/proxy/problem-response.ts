/**
 * The few answers the transport makes itself (upstream unreachable on ungoverned traffic, a
 * forbidden CONNECT port, an engine bug), in the same RFC 9457 shape as the engine's problems.
 * Verdicts are never made here: those come from the `GateHandler`.
 */
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { GateResponse } from '../engine/index.js';
import type { ErrorCode } from '../errors.js';

const encoder = new TextEncoder();

export interface TransportProblemInit {
  readonly status: number;
  /** Slug for `urn:effectgate:problem:<slug>`. */
  readonly problem: string;
  readonly title: string;
  readonly detail: string;
  readonly code?: ErrorCode;
}

/** An `application/problem+json` response; `message` repeats `detail` for SDKs that read only it. */
export function problemResponse(init: TransportProblemInit): GateResponse {
  const body = {
    type: `urn:effectgate:problem:${init.problem}`,
    title: init.title,
    status: init.status,
    detail: init.detail,
    message: init.detail,
    ...(init.code === undefined ? {} : { code: init.code }),
  };
  return {
    status: init.status,
    headers: { 'content-type': 'application/problem+json', 'cache-control': 'no-store' },
    body: encoder.encode(JSON.stringify(body)),
  };
}

/** 502, or 504 when the upstream timed out, for traffic the gate relays without governing it. */
export function upstreamFailedResponse(error: string, timedOut: boolean): GateResponse {
  return problemResponse({
    status: timedOut ? 504 : 502,
    problem: 'upstream_failed',
    title: timedOut ? 'Upstream timed out' : 'Upstream unreachable',
    detail: `The destination gave no usable response (${error}).`,
    code: 'EG_ERR_UPSTREAM_FAILED',
  });
}

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
