/**
 * Shared set-up for the upstream client tests: loopback upstreams and clients that are closed
 * after each test, and a governed request to send.
 */
import { afterEach } from 'vitest';
import type { UpstreamRequest } from '../../../src/engine/types.js';
import { createUpstreamClient, type UpstreamClient } from '../../../src/proxy/upstream-client.js';
import { startUpstream, type Upstream } from '../../helpers/upstream.js';

export const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

export async function upstreamWith(...args: Parameters<typeof startUpstream>): Promise<Upstream> {
  const up = await startUpstream(...args);
  cleanups.push(() => up.close());
  return up;
}

export function client(options: Parameters<typeof createUpstreamClient>[0] = {}): UpstreamClient {
  const c = createUpstreamClient(options);
  cleanups.push(() => c.close());
  return c;
}

export function upstreamRequest(port: number, overrides: Partial<UpstreamRequest> = {}): UpstreamRequest {
  return {
    scheme: 'http',
    method: 'POST',
    host: '127.0.0.1',
    port,
    pathAndQuery: '/items',
    headers: { 'content-type': 'application/json' },
    body: new TextEncoder().encode('{"title":"hello"}'),
    ...overrides,
  };
}
