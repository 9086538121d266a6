/**
 * Writes a complete `GateResponse` (a verdict, a transport refusal or a relayed upstream answer)
 * to the client with explicit framing.
 */
import type { ServerResponse } from 'node:http';
import type { GateBodyStream, GateResponse } from '../engine/index.js';
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
  if (res.destroyed || res.writableEnded) {
    // The client left while the gate waited for the head: nobody will read the stream.
    response.stream?.cancel('the agent closed the connection before the answer');
    return;
  }
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
  if (response.stream !== undefined) {
    // A streamed answer (an MCP event stream): chunked, each chunk as it comes.
    delete headers['content-length'];
    const stream = response.stream;
    writeStream(res, response.status, headers, stream, bodyless).catch(() => {
      stream.cancel('the answer could not be written');
      res.destroy();
    });
    return;
  }
  res.writeHead(response.status, headers);
  res.end(bodyless ? undefined : response.body);
}

/**
 * Writes a streamed body with backpressure: the upstream is paused while the client is slow, and
 * cancelled when the client goes away (the engine then records the attempt without a response).
 * A stream that breaks midway cuts the connection: the only honest signal left.
 */
async function writeStream(
  res: ServerResponse,
  status: number,
  headers: Record<string, string | string[]>,
  stream: GateBodyStream,
  bodyless: boolean,
): Promise<void> {
  const gone = (): void => {
    if (!res.writableFinished) stream.cancel('the agent closed the connection');
  };
  res.once('close', gone);
  res.writeHead(status, headers);
  // The head now, not with the first chunk: an agent waits for it before anything else comes.
  res.flushHeaders();
  if (bodyless) {
    stream.cancel('the response to this method has no body');
    res.end();
    return;
  }
  try {
    for await (const chunk of stream) {
      if (res.destroyed) break;
      if (!res.write(chunk)) await drainedOrClosed(res);
    }
    res.end();
  } catch {
    res.destroy();
  }
}

function drainedOrClosed(res: ServerResponse): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}
