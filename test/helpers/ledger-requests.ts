/**
 * What an agent sends the ledger destination (test/fault/ledger-destination.ts) through a gate in
 * process, and how a test reads the gate's headers on the answer: shared by the shadow-mode suites.
 */
import type { GateRequest, GateResponse } from '../../src/engine/types.js';
import type { LedgerDestination } from '../fault/ledger-destination.js';

/** `POST /<collection>/effects { order, amount: 5 }` in run `run` (no other context header). */
export function effectPost(
  dest: LedgerDestination,
  collection: string,
  order: string,
  run: string,
): GateRequest {
  return {
    scheme: 'http',
    method: 'POST',
    host: '127.0.0.1',
    port: dest.port,
    path: `/${collection}/effects`,
    query: '',
    headers: { 'content-type': 'application/json' },
    body: new TextEncoder().encode(JSON.stringify({ order, amount: 5 })),
    context: { run, step: null, operation: null, worker: null, agentVersion: null, retryReason: null },
  };
}

/** A response header's (first) value. */
export function headerOf(res: GateResponse, name: string): string | undefined {
  const v = res.headers[name];
  return Array.isArray(v) ? v[0] : v;
}
