/**
 * The interceptor as a thin adapter: head translation (every undici header form), pass-through
 * untouched, refusals and governed responses replayed into new-style and legacy handlers, the
 * governed body buffered from every body type undici accepts, and `send` through the next dispatcher
 * telling `not_sent` from `sent_no_response`. No network: the next dispatcher is a fake.
 */
import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { describe, expect, it } from 'vitest';
import type {
  GateHandler,
  GateRequest,
  GateRequestHead,
  GateResponse,
  RouteDecision,
  UpstreamResult,
  UpstreamSender,
} from '../../../src/engine/index.js';
import { EffectgateError } from '../../../src/errors.js';
import { gateInterceptor } from '../../../src/undici/index.js';

type Dispatch = Dispatcher.Dispatch;

class FakeGate implements GateHandler {
  readonly heads: GateRequestHead[] = [];
  readonly handled: GateRequest[] = [];
  readonly results: UpstreamResult[] = [];
  constructor(
    private readonly decision: RouteDecision,
    private readonly answer: GateResponse = {
      status: 201,
      headers: { 'effectgate-verdict': 'allow' },
      body: new Uint8Array(),
    },
    private readonly sendFirst = false,
  ) {}
  route(head: GateRequestHead): RouteDecision {
    this.heads.push(head);
    return this.decision;
  }
  async handle(request: GateRequest, send: UpstreamSender): Promise<GateResponse> {
    this.handled.push(request);
    if (!this.sendFirst) return this.answer;
    const result = await send({
      scheme: request.scheme,
      method: request.method,
      host: request.host,
      port: request.port,
      pathAndQuery: request.path,
      headers: { 'x-sent': '1' },
      body: request.body,
    });
    this.results.push(result);
    if (result.kind === 'stream') throw new Error('this gate never asks for a stream');
    return result.kind === 'response'
      ? { status: result.status, headers: result.headers, body: result.body }
      : { status: 502, headers: {}, body: new TextEncoder().encode(result.dispatchState) };
  }
  refuse(_head: GateRequestHead | null, problem: string, detail: string): GateResponse {
    return {
      status: problem === 'body_too_large' ? 413 : 400,
      headers: {},
      body: new TextEncoder().encode(detail),
    };
  }
}

interface Recorded {
  events: string[];
  status: number;
  headers: Record<string, unknown>;
  body: string;
  error: Error | null;
  done: Promise<void>;
}

function recorder(): { handler: Dispatcher.DispatchHandler; rec: Recorded } {
  let finish!: () => void;
  const rec: Recorded = {
    events: [],
    status: 0,
    headers: {},
    body: '',
    error: null,
    done: new Promise<void>((r) => {
      finish = r;
    }),
  };
  const handler: Dispatcher.DispatchHandler = {
    onRequestStart: () => rec.events.push('start'),
    onResponseStart: (_c, status, headers) => {
      rec.events.push('head');
      rec.status = status;
      rec.headers = headers;
    },
    onResponseData: (_c, chunk) => {
      rec.events.push('data');
      rec.body += chunk.toString();
    },
    onResponseEnd: () => {
      rec.events.push('end');
      finish();
    },
    onResponseError: (_c, err) => {
      rec.events.push('error');
      rec.error = err;
      finish();
    },
  };
  return { handler, rec };
}

const nextNever: Dispatch = () => {
  throw new Error('must not reach the next dispatcher');
};

function capture(): { next: Dispatch; calls: { opts: Dispatcher.DispatchOptions; handler: unknown }[] } {
  const calls: { opts: Dispatcher.DispatchOptions; handler: unknown }[] = [];
  return {
    calls,
    next: (opts, handler) => {
      calls.push({ opts, handler });
      return true;
    },
  };
}

const base = { origin: 'http://API.Example.com:8080', method: 'GET', path: '/x' } as const;

describe('gateInterceptor: head translation', () => {
  it.each([
    ['an object (mixed case)', { 'X-A': '1', 'x-b': ['2', '3'], 'Effectgate-Run': 'hdr-run', n: 5 }],
    ['a flat array', ['X-A', '1', 'x-b', '2', 'x-b', '3', 'effectgate-run', 'hdr-run', 'n', '5']],
    [
      'an array of pairs',
      [
        ['x-a', '1'],
        ['x-b', ['2', '3']],
        ['effectgate-run', 'hdr-run'],
        ['n', '5'],
      ],
    ],
    [
      'a Map',
      new Map<string, string | string[]>([
        ['x-a', '1'],
        ['x-b', ['2', '3']],
        ['effectgate-run', 'hdr-run'],
        ['n', '5'],
      ]),
    ],
  ])('reads headers given as %s', (_name, headers) => {
    const gate = new FakeGate({ kind: 'pass' });
    const { next } = capture();
    gateInterceptor(gate)(next)({ ...base, headers: headers as never }, recorder().handler);
    const head = gate.heads[0]!;
    expect(head).toMatchObject({
      scheme: 'http',
      method: 'GET',
      host: 'api.example.com',
      port: 8080,
      path: '/x',
    });
    expect(head.headers).toEqual({ 'x-a': '1', 'x-b': ['2', '3'], n: '5' });
    expect(head.context.run).toBe('hdr-run');
  });

  it('reads the query option, default ports and https origins given as URL objects', () => {
    const gate = new FakeGate({ kind: 'pass' });
    const { next } = capture();
    gateInterceptor(gate)(next)(
      { origin: new URL('https://h.test'), method: 'POST', path: '/p', query: { a: 'b c' } },
      recorder().handler,
    );
    expect(gate.heads[0]).toMatchObject({
      scheme: 'https',
      port: 443,
      path: '/p',
      query: 'a=b%20c',
      method: 'POST',
    });
  });
});

describe('gateInterceptor: pass', () => {
  it('hands the very same options to the next dispatcher, and the response back without the gate namespace', async () => {
    const gate = new FakeGate({ kind: 'pass' });
    const { next, calls } = capture();
    const opts = { ...base, headers: { accept: 'text/plain' } };
    const { handler, rec } = recorder();
    expect(gateInterceptor(gate)(next)(opts, handler)).toBe(true);
    expect(calls[0]!.opts).toBe(opts);
    // The upstream's answer reaches the caller's handler as it came, minus Effectgate-* fields.
    const passed = calls[0]!.handler as Dispatcher.DispatchHandler;
    const controller = {} as Dispatcher.DispatchController;
    passed.onRequestStart?.(controller, {});
    passed.onResponseStart?.(controller, 200, { 'effectgate-verdict': 'duplicate', 'x-up': '1' }, 'OK');
    passed.onResponseData?.(controller, Buffer.from('hi'));
    passed.onResponseEnd?.(controller, {});
    await rec.done;
    expect(rec.events).toEqual(['start', 'head', 'data', 'end']);
    expect(rec.headers).toEqual({ 'x-up': '1' });
    expect(rec.body).toBe('hi');
  });

  it('strips Effectgate-* headers and sends the normalized path it classified', () => {
    const gate = new FakeGate({ kind: 'pass' });
    const { next, calls } = capture();
    gateInterceptor(gate)(next)(
      {
        ...base,
        path: '/a/./b/%7euser/../c?q=1',
        headers: { 'Effectgate-Run': 'r', host: 'h', accept: 'x' },
      },
      recorder().handler,
    );
    expect(calls[0]!.opts.path).toBe('/a/b/c?q=1');
    expect(calls[0]!.opts.headers).toEqual({ host: 'h', accept: 'x' });
  });
});

describe('gateInterceptor: refuse and govern', () => {
  it('answers a refusal itself, never reaching the next dispatcher', async () => {
    const refusal = {
      status: 403,
      headers: { 'content-type': 'application/problem+json' },
      body: Buffer.from('{"v":1}'),
    };
    const gate = new FakeGate({ kind: 'refuse', response: refusal });
    const { handler, rec } = recorder();
    gateInterceptor(gate)(nextNever)({ ...base }, handler);
    await rec.done;
    expect(rec.events).toEqual(['start', 'head', 'data', 'end']);
    expect(rec.status).toBe(403);
    expect(rec.headers).toMatchObject({ 'content-type': 'application/problem+json', 'content-length': '7' });
    expect(rec.body).toBe('{"v":1}');
  });

  it('sends no body for HEAD', async () => {
    const gate = new FakeGate({
      kind: 'refuse',
      response: { status: 403, headers: {}, body: Buffer.from('x') },
    });
    const { handler, rec } = recorder();
    gateInterceptor(gate)(nextNever)({ ...base, method: 'HEAD' }, handler);
    await rec.done;
    expect(rec.events).toEqual(['start', 'head', 'end']);
  });

  it.each([
    ['a string', 'hello'],
    ['a Buffer', Buffer.from('hello')],
    ['a Uint8Array', new TextEncoder().encode('hello')],
    ['a Readable', Readable.from([Buffer.from('hel'), Buffer.from('lo')])],
    [
      'an async iterable',
      (async function* () {
        yield 'he';
        yield new TextEncoder().encode('llo');
      })(),
    ],
  ])('buffers a governed body given as %s', async (_name, body) => {
    const gate = new FakeGate({ kind: 'govern', maxBodyBytes: 100 });
    const { handler, rec } = recorder();
    gateInterceptor(gate, { run: 'opt-run', step: 's1' })(nextNever)(
      { ...base, method: 'POST', body: body as never },
      handler,
    );
    await rec.done;
    expect(rec.status).toBe(201);
    expect(Buffer.from(gate.handled[0]!.body).toString()).toBe('hello');
    expect(gate.handled[0]!.context).toMatchObject({ run: 'opt-run', step: 's1' });
  });

  it('lets Effectgate-Run win over the run option, and gives an empty body for null', async () => {
    const gate = new FakeGate({ kind: 'govern', maxBodyBytes: 100 });
    const { handler, rec } = recorder();
    gateInterceptor(gate, { run: 'opt-run' })(nextNever)(
      { ...base, method: 'POST', body: null, headers: { 'effectgate-run': 'hdr-run' } },
      handler,
    );
    await rec.done;
    expect(gate.handled[0]!.context.run).toBe('hdr-run');
    expect(gate.handled[0]!.body.byteLength).toBe(0);
    expect(gate.handled[0]!.headers['effectgate-run']).toBeUndefined();
  });

  it('refuses 413 over maxBodyBytes, declared or streamed, without calling handle()', async () => {
    for (const opts of [
      { body: 'x'.repeat(11) },
      { body: Readable.from(['x'.repeat(6), 'x'.repeat(6)]) },
      { body: 'x', headers: { 'content-length': '50' } },
    ]) {
      const gate = new FakeGate({ kind: 'govern', maxBodyBytes: 1000 });
      const { handler, rec } = recorder();
      gateInterceptor(gate, { maxBodyBytes: 10 })(nextNever)({ ...base, method: 'POST', ...opts }, handler);
      await rec.done;
      expect(rec.status).toBe(413);
      expect(gate.handled).toHaveLength(0);
    }
  });

  it('sends through the next dispatcher and buffers its response', async () => {
    const gate = new FakeGate({ kind: 'govern', maxBodyBytes: 100 }, undefined, true);
    const calls: Dispatcher.DispatchOptions[] = [];
    const next: Dispatch = (opts, h) => {
      calls.push(opts);
      const c = { abort() {}, pause() {}, resume() {}, aborted: false, paused: false, reason: null };
      setImmediate(() => {
        h.onRequestStart?.(c, {});
        h.onResponseStart?.(c, 200, { 'content-type': 'text/plain', connection: 'keep-alive' }, 'OK');
        h.onResponseData?.(c, Buffer.from('up'));
        h.onResponseData?.(c, Buffer.from('stream'));
        h.onResponseEnd?.(c, {});
      });
      return true;
    };
    const { handler, rec } = recorder();
    gateInterceptor(gate)(next)({ ...base, method: 'POST', body: 'abc' }, handler);
    await rec.done;
    expect(calls[0]).toMatchObject({
      origin: 'http://api.example.com:8080',
      path: '/x',
      method: 'POST',
      headers: { 'x-sent': '1', 'content-length': '3' },
    });
    expect(gate.results[0]).toMatchObject({
      kind: 'response',
      status: 200,
      headers: { 'content-type': 'text/plain' },
    });
    expect(rec.status).toBe(200);
    expect(rec.body).toBe('upstream');
  });

  it('tells not_sent (error before onRequestStart) from sent_no_response (after it)', async () => {
    const failing =
      (started: boolean, code: string): Dispatch =>
      (_opts, h) => {
        const c = { abort() {}, pause() {}, resume() {}, aborted: false, paused: false, reason: null };
        setImmediate(() => {
          if (started) h.onRequestStart?.(c, {});
          h.onResponseError?.(c, Object.assign(new Error(code), { code }));
        });
        return true;
      };
    const cases = [
      [false, 'ECONNREFUSED', 'not_sent'],
      [true, 'ECONNRESET', 'sent_no_response'],
      [true, 'ECONNREFUSED', 'sent_no_response'],
    ] as const;
    for (const [started, code, state] of cases) {
      const gate = new FakeGate({ kind: 'govern', maxBodyBytes: 100 }, undefined, true);
      const { handler, rec } = recorder();
      gateInterceptor(gate)(failing(started, code))({ ...base, method: 'POST', body: '{}' }, handler);
      await rec.done;
      expect(gate.results[0]).toMatchObject({ kind: 'failure', dispatchState: state, error: code });
    }
  });
});

describe('gateInterceptor: handlers', () => {
  it('drives a legacy handler (onConnect/onHeaders/onData/onComplete)', async () => {
    const gate = new FakeGate({
      kind: 'refuse',
      response: { status: 403, headers: { a: 'b' }, body: Buffer.from('no') },
    });
    const events: unknown[] = [];
    const done = new Promise<void>((resolve) => {
      const legacy = {
        onConnect: () => events.push('connect'),
        onHeaders: (status: number, raw: Buffer[]) => {
          events.push(status, raw.map(String));
          return true;
        },
        onData: (chunk: Buffer) => {
          events.push(chunk.toString());
          return true;
        },
        onComplete: () => {
          events.push('complete');
          resolve();
        },
        onError: () => {},
      };
      gateInterceptor(gate)(nextNever)({ ...base }, legacy as unknown as Dispatcher.DispatchHandler);
    });
    await done;
    expect(events).toEqual(['connect', 403, ['a', 'b', 'content-length', '2'], 'no', 'complete']);
  });

  it('honours pause/resume and abort', async () => {
    const gate = new FakeGate({
      kind: 'refuse',
      response: { status: 403, headers: {}, body: Buffer.from('no') },
    });
    const events: string[] = [];
    let controller!: Dispatcher.DispatchController;
    gateInterceptor(gate)(nextNever)(
      { ...base },
      {
        onRequestStart: (c) => {
          controller = c;
          events.push('start');
        },
        onResponseStart: (c) => {
          events.push('head');
          c.pause();
        },
        onResponseData: () => events.push('data'),
        onResponseEnd: () => events.push('end'),
        onResponseError: () => events.push('error'),
      },
    );
    await new Promise((r) => setImmediate(r));
    expect(events).toEqual(['start', 'head']);
    controller.resume();
    await new Promise((r) => setImmediate(r));
    expect(events).toEqual(['start', 'head', 'data', 'end']);

    const aborted: string[] = [];
    gateInterceptor(gate)(nextNever)(
      { ...base },
      {
        onRequestStart: (c) => c.abort(new Error('caller gave up')),
        onResponseStart: () => aborted.push('head'),
        onResponseError: (_c, err) => aborted.push(err.message),
      },
    );
    await new Promise((r) => setImmediate(r));
    expect(aborted).toEqual(['caller gave up']);
  });

  it('validates its options', () => {
    const gate = new FakeGate({ kind: 'pass' });
    expect(() => gateInterceptor(gate, { run: '' })).toThrow(EffectgateError);
    expect(() => gateInterceptor(gate, { step: 'a\nb' })).toThrow(EffectgateError);
    expect(() => gateInterceptor(gate, { maxBodyBytes: 0 })).toThrow(EffectgateError);
  });
});
