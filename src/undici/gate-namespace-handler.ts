import type { Dispatcher } from 'undici';
import { withoutGateHeaders } from '../engine/index.js';

type Handler = Dispatcher.DispatchHandler;
type Controller = Dispatcher.DispatchController;
type Headers = Parameters<NonNullable<Handler['onResponseStart']>>[2];

/**
 * Passes an ungoverned response through untouched but for the gate's namespace: `Effectgate-*`
 * response fields are the gate's word, so a destination's own are dropped (a destination
 * answering `Effectgate-Verdict: duplicate` must not read as the gate's verdict). One small object
 * per request; headers are copied only when one of them is in the namespace. (compose() hands
 * interceptors new-style handlers, so only the new API is forwarded.)
 */
export class GateNamespaceHandler implements Handler {
  readonly #h: Handler;

  constructor(handler: Handler) {
    this.#h = handler;
  }

  onRequestStart(controller: Controller, context: unknown): void {
    this.#h.onRequestStart?.(controller, context);
  }

  onRequestUpgrade(
    controller: Controller,
    statusCode: number,
    headers: Headers,
    socket: Parameters<NonNullable<Handler['onRequestUpgrade']>>[3],
  ): void {
    this.#h.onRequestUpgrade?.(controller, statusCode, withoutGateHeaders(headers) as Headers, socket);
  }

  onResponseStart(
    controller: Controller,
    statusCode: number,
    headers: Headers,
    statusMessage?: string,
  ): void {
    this.#h.onResponseStart?.(controller, statusCode, withoutGateHeaders(headers) as Headers, statusMessage);
  }

  onResponseData(controller: Controller, chunk: Buffer): void {
    this.#h.onResponseData?.(controller, chunk);
  }

  onResponseEnd(controller: Controller, trailers: Headers): void {
    this.#h.onResponseEnd?.(controller, trailers);
  }

  onResponseError(controller: Controller, error: Error): void {
    this.#h.onResponseError?.(controller, error);
  }
}
