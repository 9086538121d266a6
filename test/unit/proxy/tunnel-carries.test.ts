import { describe, expect, it } from 'vitest';
import type { RouteDecision } from '../../../src/engine/index.js';
import { type TunnelRouting, tunnelCarries } from '../../../src/proxy/tunnel-carries.js';

const PASS: RouteDecision = { kind: 'pass' };
const GOVERN: RouteDecision = { kind: 'govern', maxBodyBytes: 1024 };
const REFUSE: RouteDecision = {
  kind: 'refuse',
  response: { status: 403, headers: {}, body: new Uint8Array() },
};

/** A tunnel to `host:443`: the CONNECT authority decided `decision`, other hosts as `others` says. */
function routing(
  host: string,
  decision: RouteDecision,
  others: Readonly<Record<string, RouteDecision>> = {},
  toolPort = false,
): TunnelRouting {
  return { authority: { host, port: 443 }, decision, route: (name) => others[name] ?? PASS, toolPort };
}

describe('tunnelCarries', () => {
  it('serves plain HTTP, relays a destination that speaks first, and closes what says nothing', () => {
    const r = routing('example.com', PASS);
    expect(tunnelCarries({ kind: 'http' }, r, false)).toEqual({ kind: 'serve' });
    expect(tunnelCarries({ kind: 'server_first' }, r, false)).toEqual({ kind: 'relay' });
    expect(tunnelCarries({ kind: 'closed' }, r, false)).toMatchObject({ kind: 'close', counter: null });
    expect(tunnelCarries({ kind: 'timeout' }, r, false)).toMatchObject({
      kind: 'close',
      counter: 'tunnelsPeekTimedOut',
    });
    expect(tunnelCarries({ kind: 'bad_tls', reason: 'truncated' }, r, true)).toEqual({
      kind: 'close',
      counter: 'tunnelsRefusedBadClientHello',
      reason: 'truncated',
    });
  });

  it('relays TLS to a host no tool names, never decrypted even with a CA', () => {
    const r = routing('example.com', PASS);
    expect(tunnelCarries({ kind: 'tls', serverName: 'example.com' }, r, true)).toEqual({ kind: 'relay' });
    expect(tunnelCarries({ kind: 'tls', serverName: null }, r, true)).toEqual({ kind: 'relay' });
  });

  it('routes the SNI: refused closes, governed is intercepted as the SNI host or closed without a CA', () => {
    const r = routing('140.82.112.5', PASS, { 'api.github.com': GOVERN, 'blocked.example': REFUSE });
    expect(tunnelCarries({ kind: 'tls', serverName: 'API.GitHub.com' }, r, true)).toEqual({
      kind: 'intercept',
      authority: { host: 'api.github.com', port: 443 },
    });
    expect(tunnelCarries({ kind: 'tls', serverName: 'api.github.com' }, r, false)).toMatchObject({
      kind: 'close',
      counter: 'tunnelsRefusedSniUngovernable',
    });
    expect(tunnelCarries({ kind: 'tls', serverName: 'blocked.example' }, r, true)).toMatchObject({
      kind: 'close',
      counter: 'tunnelsRefusedSniBlocked',
    });
  });

  it('never relays TLS to a governed CONNECT host, whatever its SNI says', () => {
    const r = routing('api.github.com', GOVERN);
    expect(tunnelCarries({ kind: 'tls', serverName: null }, r, true)).toEqual({
      kind: 'intercept',
      authority: { host: 'api.github.com', port: 443 },
    });
    expect(tunnelCarries({ kind: 'tls', serverName: 'other.example' }, r, false)).toMatchObject({
      kind: 'close',
      counter: 'tunnelsRefusedSniUngovernable',
    });
  });

  it('closes instead of relaying on a port open only for a tool', () => {
    const r = routing('example.com', GOVERN, {}, true);
    expect(tunnelCarries({ kind: 'server_first' }, r, true)).toMatchObject({
      kind: 'close',
      counter: 'tunnelsRefusedUnreadable',
    });
    expect(tunnelCarries({ kind: 'http' }, r, true)).toEqual({ kind: 'serve' });
  });
});
