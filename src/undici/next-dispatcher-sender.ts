/** The engine's `UpstreamSender` for the interceptor: dispatches through the next dispatcher in the chain. */
import type { Dispatcher } from 'undici';
import { dispatchBuffered, type UpstreamRequest, type UpstreamSender } from '../engine/index.js';

/**
 * Sends the engine's rebuilt request through `dispatch` (the next dispatcher in the compose
 * chain) with the caller's own timeouts; buffering, deadlines and what counts as `not_sent` are the
 * shared `dispatchBuffered`, exactly as in the forward proxy.
 */
export function createSender(
  dispatch: Dispatcher.Dispatch,
  opts: Dispatcher.DispatchOptions,
  limit: number,
): UpstreamSender {
  return (request: UpstreamRequest) =>
    dispatchBuffered(dispatch, request, {
      maxResponseBytes: limit,
      ...(opts.headersTimeout == null ? {} : { headersTimeout: opts.headersTimeout }),
      ...(opts.bodyTimeout == null ? {} : { bodyTimeout: opts.bodyTimeout }),
    });
}
