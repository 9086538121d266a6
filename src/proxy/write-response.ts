/**
 * Writes a complete `GateResponse` (a verdict, a transport refusal or a relayed upstream answer)
 * to the client with explicit framing.
 */
import type { ServerResponse } from 'node:http';
import type { GateResponse } from '../engine/index.js';
import { stripHopByHop } from '../engine/index.js';

/**
 * RFC 9110 §8.6: a 1xx/204 response carries no Content-Length, a 304 may carry the selected
 * representation's; a HEAD response keeps the length a GET would have had, so a given value is
 * relayed as is. Everything else gets the length of the bytes actually sent.
 */
export function writeGateResponse(
  res: ServerResponse,
  response: GateResponse,
  method: string,
  gateMade = false,
): void {
  if (res.destroyed || res.writableEnded) return;
  const headers = stripHopByHop(response.headers);
  // A refusal made by the gate itself may carry this hop's own challenge (the 407 of proxy
  // authentication); an upstream's Proxy-Authenticate is never relayed.
  const challenge = gateMade ? response.headers['proxy-authenticate'] : undefined;
  if (challenge !== undefined) headers['proxy-authenticate'] = challenge;
  const given = headers['content-length'];
  delete headers['content-length'];
  const bodyless =
    method === 'HEAD' || response.status === 204 || response.status === 304 || response.status < 200;
  if (!bodyless) {
    headers['content-length'] = String(response.body.byteLength);
  } else if (given !== undefined && response.status !== 204 && response.status >= 200) {
    headers['content-length'] = given;
  }
  res.writeHead(response.status, headers);
  res.end(bodyless ? undefined : response.body);
}
