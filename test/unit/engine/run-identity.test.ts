import { describe, expect, it } from 'vitest';
import { clientAddress, isDerivedRun, RunIdentity } from '../../../src/engine/run-identity.js';

const acme = { tenant: 'acme', area: 'support', agent: 'triage' };
const globex = { tenant: 'globex', area: 'support', agent: 'triage' };

function clock(): { now: () => number; advance: (ms: number) => void } {
  let t = 1_000_000;
  return { now: () => t, advance: (ms) => (t += ms) };
}

describe('RunIdentity (the run of a request that names none)', () => {
  it('is one run per scope and client address while the client keeps calling', () => {
    const c = clock();
    const started: string[] = [];
    const runs = new RunIdentity({
      fixed: null,
      idleMs: 60_000,
      now: c.now,
      onNewRun: (run) => started.push(run),
    });
    const a = runs.runOf(acme, '10.0.0.7');
    expect(a).toMatch(/^auto-[0-9a-f-]{36}$/);
    for (let i = 0; i < 5; i++) {
      c.advance(59_000);
      expect(runs.runOf(acme, '10.0.0.7')).toBe(a);
    }
    // Another address, another scope, in process (no address): each its own run.
    const others = [runs.runOf(acme, '10.0.0.8'), runs.runOf(globex, '10.0.0.7'), runs.runOf(acme, null)];
    expect(new Set([a, ...others]).size).toBe(4);
    expect(started).toEqual([a, ...others]);
  });

  it('starts a new run after idleMs without a request from that client', () => {
    const c = clock();
    const runs = new RunIdentity({ fixed: null, idleMs: 60_000, now: c.now });
    const first = runs.runOf(acme, '10.0.0.7');
    c.advance(60_000);
    const second = runs.runOf(acme, '10.0.0.7');
    expect(second).not.toBe(first);
    c.advance(1);
    expect(runs.runOf(acme, '10.0.0.7')).toBe(second);
  });

  it('a fixed run (--run-id, createGate runId) is every request’s, never derived', () => {
    const runs = new RunIdentity({ fixed: 'nightly-42', idleMs: 1 });
    expect(runs.fixed).toBe('nightly-42');
    expect(runs.runOf(acme, '10.0.0.7')).toBe('nightly-42');
    expect(runs.runOf(globex, null)).toBe('nightly-42');
  });

  it('remembers at most maxClients, forgetting the least recently seen first', () => {
    const c = clock();
    const runs = new RunIdentity({ fixed: null, idleMs: 60_000, maxClients: 3, now: c.now });
    const ids = ['a', 'b', 'c'].map((x) => runs.runOf(acme, x));
    c.advance(1);
    expect(runs.runOf(acme, 'a')).toBe(ids[0]); // a is now the most recently seen
    runs.runOf(acme, 'd'); // full: b, the least recently seen, is forgotten
    expect(runs.runOf(acme, 'a')).toBe(ids[0]);
    expect(runs.runOf(acme, 'c')).toBe(ids[2]);
    expect(runs.runOf(acme, 'b')).not.toBe(ids[1]);
  });
});

describe('clientAddress and isDerivedRun', () => {
  it('spells an IPv4 client once, whether the listener is dual-stack or not', () => {
    expect(clientAddress('::ffff:10.0.0.7')).toBe('10.0.0.7');
    expect(clientAddress('10.0.0.7')).toBe('10.0.0.7');
    expect(clientAddress('::1')).toBe('::1');
    expect(clientAddress('::ffff:a00:7')).toBe('::ffff:a00:7');
    expect(clientAddress(null)).toBe('');
    const runs = new RunIdentity({ fixed: null, idleMs: 60_000 });
    expect(runs.runOf(acme, '::ffff:10.0.0.7')).toBe(runs.runOf(acme, '10.0.0.7'));
  });

  it('knows the ids only the gate makes', () => {
    const runs = new RunIdentity({ fixed: null, idleMs: 60_000 });
    expect(isDerivedRun(runs.runOf(acme, null))).toBe(true);
    expect(isDerivedRun('nightly-42')).toBe(false);
  });
});
