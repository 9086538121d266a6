/**
 * The fault suite's own instruments, checked before anything is judged with them: the relay cuts
 * what it says it cuts, the destination's ledger tells a replay from a second effect, and the
 * checker finds each planted violation. No database needed: the relay is tested against a
 * loopback echo server.
 */
import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AttemptRecord, OperationRecord } from '../../src/store/types.js';
import { toolOf } from './fault-harness.js';
import { checkLedger, type TrailSnapshot } from './ledger-check.js';
import { type LedgerEntry, startLedgerDestination } from './ledger-destination.js';
import { STATEMENT, startTcpRelay } from './tcp-relay.js';

describe('tcp relay', () => {
  let echo: Server;
  let echoPort = 0;

  beforeAll(async () => {
    echo = createServer((s) => {
      s.on('error', () => undefined);
      s.pipe(s);
    });
    echo.listen(0, '127.0.0.1');
    await once(echo, 'listening');
    echoPort = (echo.address() as { port: number }).port;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => echo.close(() => resolve()));
  });

  /** Connects through the relay; resolves with the socket, or with null when the relay drops it. */
  async function dial(port: number): Promise<Socket | null> {
    const s = connect(port, '127.0.0.1');
    s.on('error', () => undefined);
    await once(s, 'connect');
    // A refused connection is destroyed right after accept: give the close a moment to arrive.
    const closed = once(s, 'close').then(() => null);
    const echoed = (async (): Promise<Socket | null> => {
      s.write('ping');
      await once(s, 'data');
      return s;
    })();
    return Promise.race([echoed, closed, sleep(1_000).then(() => null)]);
  }

  it('relays, cuts current connections, refuses while down, flaps and closes itself down', async () => {
    const relay = await startTcpRelay({ targetPort: echoPort });
    try {
      const a = await dial(relay.port);
      expect(a).not.toBeNull();
      const aClosed = once(a!, 'close');
      expect(relay.cut()).toBe(1);
      await aClosed;
      expect(await dial(relay.port)).not.toBeNull();

      relay.down();
      expect(relay.isDown).toBe(true);
      expect(await dial(relay.port)).toBeNull();
      relay.up();
      expect(await dial(relay.port)).not.toBeNull();

      const flapping = relay.flap(50, 400);
      expect(relay.isDown).toBe(true);
      await flapping;
      expect(relay.isDown).toBe(false);
      expect(relay.stats().outages).toBeGreaterThanOrEqual(4);
      expect(relay.stats().refused).toBeGreaterThanOrEqual(1);
      expect(relay.url('postgres://postgres@127.0.0.1:5432/test?x=1')).toBe(
        `postgres://postgres@127.0.0.1:${relay.port}/test?x=1`,
      );
    } finally {
      await relay.close();
    }
  });

  it('traps one statement before it is forwarded, or after the server answered it', async () => {
    const relay = await startTcpRelay({ targetPort: echoPort });
    try {
      const s = (await dial(relay.port))!;
      const before = relay.trigger({
        pattern: STATEMENT.recordOutcome,
        when: 'before-forward',
        action: 'down',
      });
      const got: Buffer[] = [];
      s.on('data', (d: Buffer) => got.push(d));
      s.write('P\u0000eg_record_outcome\u0000select eg_record_outcome($1)');
      await before;
      await once(s, 'close');
      expect(Buffer.concat(got).toString()).toBe('');
      expect(relay.isDown).toBe(true);
      relay.up();

      const t = (await dial(relay.port))!;
      const after = relay.trigger({ pattern: STATEMENT.decide, when: 'after-reply', action: 'cut' });
      const seen: Buffer[] = [];
      t.on('data', (d: Buffer) => seen.push(d));
      // A statement that only mentions the name is not the trapped one: it goes through.
      t.write('select eg_decided()');
      await once(t, 'data');
      expect(Buffer.concat(seen).toString()).toBe('select eg_decided()');
      seen.length = 0;
      t.write('B\u0000\u0000eg_decide\u0000');
      await after;
      await once(t, 'close');
      // The echo server answered the Bind (the statement "ran"); the client never saw the answer.
      expect(Buffer.concat(seen).toString()).toBe('');
      expect(relay.isDown).toBe(false);
      await expect(
        relay.trigger({ pattern: 'never', when: 'before-forward', action: 'cut' }, 50),
      ).rejects.toThrow(/no statement/);
    } finally {
      await relay.close();
    }
  });

  it('blackholes: accepts and forwards nothing until up', async () => {
    const relay = await startTcpRelay({ targetPort: echoPort });
    try {
      relay.blackhole();
      expect(await dial(relay.port)).toBeNull();
      relay.up();
      expect(await dial(relay.port)).not.toBeNull();
    } finally {
      await relay.close();
    }
  });
});

describe('ledger destination', () => {
  it('performs, replays an honoured key, commits and drops, holds until released', async () => {
    const dest = await startLedgerDestination({ honors: (c) => c === 'honored' });
    try {
      const post = async (collection: string, order: string, key?: string): Promise<number | string> => {
        try {
          const r = await request(`${dest.url}/${collection}/effects`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
            body: JSON.stringify({ order, amount: 1 }),
          });
          await r.body.text();
          return r.statusCode;
        } catch {
          return 'dropped';
        }
      };
      expect(await post('honored', 'o1', 'k1')).toBe(201);
      expect(await post('honored', 'o1', 'k1')).toBe(201);
      expect(await post('held', 'o2', 'k2')).toBe(201);
      expect(await post('held', 'o2', 'k3')).toBe(201);
      dest.plan('o3', { behaviour: 'commit-and-drop' });
      expect(await post('held', 'o3', 'k4')).toBe('dropped');
      dest.plan('o4', { behaviour: 'hold' });
      const held = post('held', 'o4', 'k5');
      const arrival = await dest.arrival('o4');
      expect(arrival.behaviour).toBe('hold');
      arrival.release();
      expect(await held).toBe(201);

      const ledger = dest.ledger();
      expect(ledger.map((e) => [e.order, e.replayed])).toEqual([
        ['o1', false],
        ['o1', true],
        ['o2', false],
        ['o2', false],
        ['o3', false],
        ['o4', false],
      ]);
      expect(ledger.find((e) => e.order === 'o3')?.answered).toBe(false);
      expect(dest.performedTwice()).toEqual([
        { collection: 'held', order: 'o2', effects: 2, idempotencyKeys: ['k2', 'k3'] },
      ]);
      const list = await request(`${dest.url}/held/effects?order=o2`);
      expect(((await list.body.json()) as unknown[]).length).toBe(2);
      expect(dest.lookups()).toBe(1);
    } finally {
      await dest.close();
    }
  });
});

describe('ledger checker', () => {
  const attempt = (over: Partial<AttemptRecord>): AttemptRecord =>
    ({ id: 'a', number: 1, dispatchState: 'response_received', ...over }) as AttemptRecord;
  const op = (over: Partial<OperationRecord>): OperationRecord =>
    ({
      id: 'op-1',
      toolId: 'fault.held',
      state: 'succeeded',
      keyValues: ['o1'],
      attempts: [attempt({})],
      ...over,
    }) as OperationRecord;
  const entry = (over: Partial<LedgerEntry>): LedgerEntry => ({
    seq: 1,
    collection: 'held',
    order: 'o1',
    idempotencyKey: 'op-1',
    replayed: false,
    effectId: 'eff_1',
    leakedRunHeader: null,
    at: 0,
    answered: true,
    ...over,
  });
  const trail = (operations: OperationRecord[], ok = true): TrailSnapshot => ({
    operations,
    approvals: [],
    chain: { ok, checked: 1, chains: 1, broken: [] },
  });
  const arrivalsOf = (ledger: LedgerEntry[]) =>
    ledger.map((e) => ({
      collection: e.collection,
      order: e.order,
      idempotencyKey: e.idempotencyKey,
      behaviour: 'ok' as const,
    }));

  it('passes a run where the trail and the ledger agree', () => {
    const ledger = [entry({})];
    const r = checkLedger({ ledger, arrivals: arrivalsOf(ledger), trail: trail([op({})]), toolOf });
    expect(r.violations).toEqual([]);
    expect(r.figures).toMatchObject({ keys: 1, performed: 1, performedTwice: 0, attemptsWithoutOutcome: 0 });
  });

  it('finds each planted violation', () => {
    const ledger = [
      entry({}),
      entry({ seq: 2, idempotencyKey: 'op-2', effectId: 'eff_2' }),
      entry({ seq: 3, order: 'o3', idempotencyKey: 'op-3', effectId: 'eff_3' }),
      entry({ seq: 4, order: 'o4', idempotencyKey: 'nobody', effectId: 'eff_4' }),
    ];
    const ops = [
      op({}),
      op({ id: 'op-2', state: 'open', attempts: [attempt({ dispatchState: null })] }),
      op({ id: 'op-3', keyValues: ['o3'], state: 'failed' }),
      op({ id: 'op-5', keyValues: ['o5'], state: 'unknown', attempts: [attempt({})] }),
      op({ id: 'op-6', keyValues: ['o6'], state: 'succeeded' }),
    ];
    const r = checkLedger({ ledger, arrivals: arrivalsOf(ledger), trail: trail(ops, false), toolOf });
    const text = r.violations.join('\n');
    expect(text).toContain('keys performed twice by the destination: 1');
    expect(text).toContain('attempts without an outcome: 1');
    expect(text).toContain('effects without their operation in the trail: 1');
    expect(text).toContain('performed effects whose operation is neither succeeded nor unknown: 2');
    expect(text).toContain('unknown operations without an attempt sent_no_response: 1');
    expect(text).toContain('requests the destination received that the trail does not know: 1');
    expect(text).toContain('succeeded operations the destination never performed: 1');
    expect(text).toContain('audit chain does not verify');
    expect(r.figures).toMatchObject({ performedTwice: 1, attemptsWithoutOutcome: 1, unknowns: 1 });
  });

  it('does not count a replay of an honoured key as a second effect, and flags an answered unknown in strict mode', () => {
    const ledger = [
      entry({ collection: 'honored' }),
      entry({ seq: 2, collection: 'honored', replayed: true }),
    ];
    const ops = [
      op({
        toolId: 'fault.honored',
        state: 'unknown',
        attempts: [attempt({ dispatchState: 'sent_no_response' }), attempt({ id: 'b', number: 2 })],
      }),
    ];
    const r = checkLedger({
      ledger,
      arrivals: arrivalsOf(ledger),
      trail: trail(ops),
      toolOf,
      strictUnknown: true,
    });
    expect(r.figures).toMatchObject({ performedTwice: 0, replays: 1 });
    expect(r.violations).toEqual([
      expect.stringContaining('unknown operations the destination answered (the gate had the answer): 1'),
    ]);
  });
});
