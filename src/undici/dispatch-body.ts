/** Buffering a governed request body from any body type undici accepts, up to a limit. */
import { EffectgateError } from '../errors.js';

const EMPTY = new Uint8Array(0);

export async function readBody(body: unknown, limit: number): Promise<Uint8Array | null> {
  if (body == null) return EMPTY;
  if (typeof body === 'string') {
    const bytes = Buffer.from(body);
    return bytes.byteLength > limit ? null : bytes;
  }
  if (body instanceof Uint8Array) return body.byteLength > limit ? null : body;
  if (ArrayBuffer.isView(body)) {
    return body.byteLength > limit ? null : new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
  }
  if (body instanceof ArrayBuffer) return body.byteLength > limit ? null : new Uint8Array(body);
  if (isBlobLike(body)) {
    return body.size > limit ? null : new Uint8Array(await body.arrayBuffer());
  }
  if (typeof (body as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function') {
    const chunks: Buffer[] = [];
    let size = 0;
    // Leaving the loop early calls the iterator's `return()`, which destroys a Readable.
    for await (const chunk of body as AsyncIterable<unknown>) {
      const bytes = toBuffer(chunk);
      size += bytes.byteLength;
      if (size > limit) return null;
      chunks.push(bytes);
    }
    return Buffer.concat(chunks, size);
  }
  throw new EffectgateError('EG_ERR_CONFIG_INVALID', 'Unsupported request body type for a governed request.');
}

function isBlobLike(body: unknown): body is Blob {
  return (
    typeof body === 'object' &&
    body !== null &&
    typeof (body as Blob).arrayBuffer === 'function' &&
    typeof (body as Blob).size === 'number'
  );
}

function toBuffer(chunk: unknown): Buffer {
  if (Buffer.isBuffer(chunk)) return chunk;
  if (typeof chunk === 'string') return Buffer.from(chunk);
  if (ArrayBuffer.isView(chunk)) return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (chunk instanceof ArrayBuffer) return Buffer.from(chunk);
  throw new EffectgateError('EG_ERR_CONFIG_INVALID', 'Unsupported chunk in a governed request body.');
}

// ---------------------------------------------------------------------------------------------
// Upstream dispatch for `Gate.handle()`, through the next dispatcher in the chain.
