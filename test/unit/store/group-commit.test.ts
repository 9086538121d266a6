/**
 * The group-commit policy (src/store/group-commit.ts) against a recording
 * sender, no sockets: a lone call goes alone at once, calls that meet a busy store share one
 * eg_batch round trip in call order, each call gets its own result, and a refused batch is resent
 * call by call only when the server rolled it back (an SQLSTATE of a failed statement), never when
 * its answer was lost (it may have committed: resending would run its calls twice). The same
 * rules on a real database are in test/integration/store/group-commit.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { RoundTripCounter } from '../../../src/store/counting-dialect.js';
import { groupCommit } from '../../../src/store/group-commit.js';
import type { HotSender, StoreFunction } from '../../../src/store/hot-call.js';

interface Sent {
  readonly fn: StoreFunction;
  readonly inputs: readonly string[];
  readonly batch: boolean;
}

/** A sender that answers each input with `{ echo: input }` once `release()` is called. */
function recordingSender(fail?: (inputs: readonly string[], batch: boolean) => unknown) {
  const sent: Sent[] = [];
  const waiting: Array<() => void> = [];
  /** Each batch's functions, call by call. */
  const batchFns: StoreFunction[][] = [];
  const answer = async (
    fn: StoreFunction,
    inputs: readonly string[],
    batch: boolean,
    fns?: StoreFunction[],
  ): Promise<unknown[]> => {
    sent.push({ fn, inputs, batch });
    if (fns !== undefined) batchFns.push(fns);
    await new Promise<void>((resolve) => waiting.push(resolve));
    const err = fail?.(inputs, batch);
    if (err !== undefined) throw err;
    return inputs.map((i) => ({ echo: JSON.parse(i) }));
  };
  const sender: HotSender = {
    one: async (fn, input) => (await answer(fn, [input], false))[0],
    many: (calls) =>
      answer(
        calls[0]!.fn,
        calls.map((c) => c.input),
        true,
        calls.map((c) => c.fn),
      ),
  };
  const release = async (): Promise<void> => {
    // Let queued microtasks and setImmediate callbacks send what they will, then answer all.
    await new Promise((r) => setImmediate(r));
    while (waiting.length > 0) {
      for (const w of waiting.splice(0)) w();
      await new Promise((r) => setImmediate(r));
    }
  };
  return { sender, sent, batchFns, release };
}

const settle = <T>(p: Promise<T>): Promise<{ ok: T } | { err: unknown }> =>
  p.then(
    (ok) => ({ ok }),
    (err: unknown) => ({ err }),
  );

describe('groupCommit', () => {
  it('sends a lone call alone, as select eg_decide($1)', async () => {
    const { sender, sent, release } = recordingSender();
    const counter = new RoundTripCounter();
    const gc = groupCommit(sender, counter, { maxInFlight: 2, maxBatch: 8 });
    const p = gc.call('eg_decide', { n: 1 });
    await release();
    expect(await p).toEqual({ echo: { n: 1 } });
    expect(sent).toEqual([{ fn: 'eg_decide', inputs: ['{"n":1}'], batch: false }]);
    expect(gc.stats()).toEqual({ batches: 0, batchedCalls: 0, fallbacks: 0 });
    expect(counter.count).toBe(1);
  });

  it('sends calls made together in one batch, in call order, and answers each its own result', async () => {
    const { sender, sent, release } = recordingSender();
    const counter = new RoundTripCounter();
    const gc = groupCommit(sender, counter, { maxInFlight: 2, maxBatch: 8 });
    const calls = [1, 2, 3, 4, 5].map((n) => gc.call('eg_record_outcome', { n }));
    await release();
    expect(await Promise.all(calls)).toEqual([1, 2, 3, 4, 5].map((n) => ({ echo: { n } })));
    expect(sent).toEqual([
      { fn: 'eg_record_outcome', inputs: [1, 2, 3, 4, 5].map((n) => `{"n":${n}}`), batch: true },
    ]);
    expect(gc.stats()).toEqual({ batches: 1, batchedCalls: 5, fallbacks: 0 });
    // Each call took part in one round trip.
    expect(counter.count).toBe(5);
  });

  it('carries proposals and outcomes together in one batch, in call order, never more than maxBatch calls', async () => {
    const { sender, sent, batchFns, release } = recordingSender();
    const gc = groupCommit(sender, new RoundTripCounter(), { maxInFlight: 4, maxBatch: 3 });
    const calls = [
      ...[1, 2, 3, 4, 5].map((n) => gc.call('eg_decide', { n })),
      gc.call('eg_record_outcome', { n: 6 }),
      gc.call('eg_decide', { n: 7 }),
      gc.call('eg_record_outcome', { n: 8 }),
    ];
    await release();
    expect(await Promise.all(calls)).toEqual([1, 2, 3, 4, 5, 6, 7, 8].map((n) => ({ echo: { n } })));
    expect(sent.map((s) => s.inputs.length)).toEqual([3, 3, 2]);
    expect(batchFns).toEqual([
      ['eg_decide', 'eg_decide', 'eg_decide'],
      ['eg_decide', 'eg_decide', 'eg_record_outcome'],
      ['eg_decide', 'eg_record_outcome'],
    ]);
  });

  it('keeps at most maxInFlight round trips in flight, whatever their functions; the calls behind them queue into one batch', async () => {
    const { sender, sent, release } = recordingSender();
    const gc = groupCommit(sender, new RoundTripCounter(), { maxInFlight: 1, maxBatch: 16 });
    const first = gc.call('eg_decide', { n: 0 });
    await new Promise((r) => setImmediate(r));
    expect(sent).toHaveLength(1);
    // The store is busy: these wait for the first round trip, then leave together.
    const later = [1, 2, 3].map((n) => gc.call('eg_decide', { n }));
    await new Promise((r) => setImmediate(r));
    expect(sent).toHaveLength(1);
    await release();
    await Promise.all([first, ...later]);
    expect(sent.map((s) => s.inputs.length)).toEqual([1, 3]);
  });

  it('resends every call of a batch the server rolled back (an SQLSTATE), each alone, with its own answer', async () => {
    // The batch fails as a deadlock would; alone, the call for n=2 raises, the others succeed.
    const raised = Object.assign(new Error('effectgate: no operation'), { code: 'P0001' });
    const { sender, sent, release } = recordingSender((inputs, batch) =>
      batch
        ? Object.assign(new Error('deadlock detected'), { code: '40P01' })
        : inputs[0] === '{"n":2}'
          ? raised
          : undefined,
    );
    const gc = groupCommit(sender, new RoundTripCounter(), { maxInFlight: 2, maxBatch: 8 });
    const calls = [1, 2, 3].map((n) => settle(gc.call('eg_decide', { n })));
    await release();
    expect(await Promise.all(calls)).toEqual([
      { ok: { echo: { n: 1 } } },
      { err: raised },
      { ok: { echo: { n: 3 } } },
    ]);
    expect(sent.map((s) => [s.batch, s.inputs.length])).toEqual([
      [true, 3],
      [false, 1],
      [false, 1],
      [false, 1],
    ]);
    expect(gc.stats()).toEqual({ batches: 1, batchedCalls: 3, fallbacks: 1 });
  });

  it.each([
    ['a cut connection (no SQLSTATE)', Object.assign(new Error('Connection terminated unexpectedly'), {})],
    ['a client-side timeout', new Error('Query read timeout')],
    [
      'the server shutting down (57P01: it may have committed first)',
      Object.assign(new Error('terminating'), { code: '57P01' }),
    ],
    ['a lost connection (08006)', Object.assign(new Error('connection failure'), { code: '08006' })],
  ])('never resends a batch whose answer was lost to %s: every call gets that error', async (_what, lost) => {
    const { sender, sent, release } = recordingSender((_inputs, batch) => (batch ? lost : undefined));
    const gc = groupCommit(sender, new RoundTripCounter(), { maxInFlight: 2, maxBatch: 8 });
    const calls = [1, 2, 3].map((n) => settle(gc.call('eg_record_outcome', { n })));
    await release();
    expect(await Promise.all(calls)).toEqual([{ err: lost }, { err: lost }, { err: lost }]);
    expect(sent).toHaveLength(1);
    expect(gc.stats().fallbacks).toBe(0);
  });

  it('sends a lone call again when it lost a deadlock (40P01) to a batch, up to three times, and never after any other error', async () => {
    let deadlocks = 2;
    const { sender, sent, release } = recordingSender((inputs) =>
      inputs[0] === '{"n":1}' && deadlocks-- > 0
        ? Object.assign(new Error('deadlock detected'), { code: '40P01' })
        : inputs[0] === '{"n":2}'
          ? Object.assign(new Error('deadlock detected'), { code: '40P01' })
          : inputs[0] === '{"n":3}'
            ? Object.assign(new Error('effectgate: no operation'), { code: 'P0001' })
            : undefined,
    );
    const gc = groupCommit(sender, new RoundTripCounter(), { maxInFlight: 1, maxBatch: 1 });
    const one = settle(gc.call('eg_decide', { n: 1 }));
    const two = settle(gc.call('eg_decide', { n: 2 }));
    const three = settle(gc.call('eg_decide', { n: 3 }));
    await release();
    expect(await one).toEqual({ ok: { echo: { n: 1 } } });
    expect(await two).toMatchObject({ err: { code: '40P01' } });
    expect(await three).toMatchObject({ err: { code: 'P0001' } });
    expect(sent.map((x) => x.inputs[0])).toEqual([
      '{"n":1}',
      '{"n":1}',
      '{"n":1}',
      '{"n":2}',
      '{"n":2}',
      '{"n":2}',
      '{"n":3}',
    ]);
  });

  it('never resends a batch answered 40003 (statement completion unknown: it may have committed)', async () => {
    const unknown = Object.assign(new Error('result is ambiguous'), { code: '40003' });
    const { sender, sent, release } = recordingSender((_inputs, batch) => (batch ? unknown : undefined));
    const gc = groupCommit(sender, new RoundTripCounter(), { maxInFlight: 2, maxBatch: 8 });
    const calls = [1, 2].map((n) => settle(gc.call('eg_decide', { n })));
    await release();
    expect(await Promise.all(calls)).toEqual([{ err: unknown }, { err: unknown }]);
    expect(sent).toHaveLength(1);
  });
});
