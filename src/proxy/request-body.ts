/**
 * Request body handling for the node:http front: bounded buffering of governed bodies, and
 * draining what a refused client is still sending so it can read the refusal.
 */
import type { IncomingMessage } from 'node:http';

export type BodyResult =
  | { readonly kind: 'complete'; readonly body: Uint8Array }
  | { readonly kind: 'too_large' }
  /** The client went away before the body was complete; nothing can be answered. */
  | { readonly kind: 'aborted' };

const EMPTY = new Uint8Array(0);

/** Whether the request carries a body (RFC 9112 §6.3: Transfer-Encoding or a non-zero length). */
export function hasBody(req: IncomingMessage): boolean {
  if (req.headers['transfer-encoding'] !== undefined) return true;
  const declared = declaredLength(req);
  return declared !== null && declared > 0;
}

/** The declared Content-Length, or null (node:http has already refused malformed values). */
export function declaredLength(req: IncomingMessage): number | null {
  const value = req.headers['content-length'];
  if (value === undefined) return null;
  const n = Number(value);
  return Number.isSafeInteger(n) && n >= 0 ? n : null;
}

/** Reads the whole body, giving up (and pausing) as soon as it exceeds `maxBytes`. */
export function readBody(req: IncomingMessage, maxBytes: number): Promise<BodyResult> {
  if (!hasBody(req)) {
    req.resume();
    return Promise.resolve({ kind: 'complete', body: EMPTY });
  }
  return new Promise<BodyResult>((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (result: BodyResult): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('close', onClose);
      resolve(result);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > maxBytes) {
        req.pause();
        chunks.length = 0;
        done({ kind: 'too_large' });
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => done({ kind: 'complete', body: Buffer.concat(chunks, size) });
    const onClose = (): void => {
      if (!req.complete) done({ kind: 'aborted' });
    };
    // A client reset surfaces as 'error' (ECONNRESET "aborted") followed by 'close'.
    req.on('error', () => {});
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('close', onClose);
  });
}

export interface DrainLimits {
  /** Bytes read and discarded before the connection is cut. */
  readonly maxBytes: number;
  /** Time allowed for the client to finish sending before the connection is cut. */
  readonly maxMs: number;
}

export const DEFAULT_DRAIN_LIMITS: DrainLimits = { maxBytes: 8 * 1024 * 1024, maxMs: 10_000 };

/**
 * Called after a refusal was written while the client may still be sending its body. Closing at
 * once would make the kernel answer the unread bytes with a reset, which can destroy the refusal
 * before the client reads it; so the rest is read and discarded (the connection stays usable),
 * up to a bound in bytes and time, after which the socket is cut.
 */
export function drainRequest(req: IncomingMessage, limits: DrainLimits = DEFAULT_DRAIN_LIMITS): void {
  if (req.complete || req.destroyed) return;
  let drained = 0;
  const cut = (): void => {
    cleanup();
    req.socket.destroy();
  };
  const onData = (chunk: Buffer): void => {
    drained += chunk.length;
    if (drained > limits.maxBytes) cut();
  };
  const timer = setTimeout(cut, limits.maxMs);
  timer.unref();
  const cleanup = (): void => {
    clearTimeout(timer);
    req.off('data', onData);
  };
  req.on('error', () => {});
  req.on('data', onData);
  req.once('end', cleanup);
  req.once('close', cleanup);
  req.resume();
}
