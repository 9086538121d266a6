/**
 * The Prometheus adapter of GateMetrics: series and labels, histogram buckets, the exposition text,
 * one registry per instance, and the scrape-time store gauges (cache, shared count, store down).
 */
import { register as globalRegistry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import {
  createPrometheusMetrics,
  OVERHEAD_BUCKETS,
  type PrometheusMetricsOptions,
  RESERVATION_WAIT_BUCKETS,
  UPSTREAM_BUCKETS,
} from '../../../src/admin/metrics.js';
import type { OperationState } from '../../../src/store/index.js';

type Counts = Partial<Record<OperationState, number>>;

/** A stand-in for what the store gauges use (countOperations, counting its calls; stats). */
function countingStore(answer: () => Promise<Counts>): PrometheusMetricsOptions['store'] & { calls: number } {
  const store = {
    calls: 0,
    stats: {
      roundTrips: 0,
      backgroundRoundTrips: 0,
      groupCommit: { batches: 0, batchedCalls: 0, fallbacks: 0 },
    },
    countOperations: () => {
      store.calls += 1;
      return answer();
    },
  };
  return store;
}

const fixedStore = (counts: Counts) => countingStore(async () => counts);

/** Every sample line (not a comment, not blank) of an exposition text. */
function samples(text: string): string[] {
  return text.split('\n').filter((l) => l !== '' && !l.startsWith('#'));
}

/** The value of the sample with exactly this name and label text, or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = samples(text).find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

// Prometheus text format 0.0.4: name, optional {label="value",…}, value, optional timestamp. NaN in
// any case, as Prometheus parses it (Go ParseFloat): prom-client writes "Nan" for an event-loop
// histogram with no samples yet.
const LABEL = String.raw`[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"`;
const SAMPLE_LINE = new RegExp(
  String.raw`^[a-zA-Z_:][a-zA-Z0-9_:]*(?:\{(?:${LABEL})(?:,${LABEL})*,?\})? (?:[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[Nn][Aa][Nn]|[-+]Inf)(?: -?\d+)?$`,
);
const COMMENT_LINE =
  /^# (?:HELP [a-zA-Z_:][a-zA-Z0-9_:]* .*|TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (?:counter|gauge|histogram|summary|untyped))$/;

const GATE_METRICS: Record<string, string> = {
  effectgate_decisions_total: 'counter',
  effectgate_upstream_duration_seconds: 'histogram',
  effectgate_gate_overhead_seconds: 'histogram',
  effectgate_reservation_waits_total: 'counter',
  effectgate_reservation_wait_seconds: 'histogram',
  effectgate_unresolved_operations: 'gauge',
  effectgate_store_up: 'gauge',
  effectgate_reconciliations_total: 'counter',
  effectgate_deferred_outcomes_total: 'counter',
  effectgate_pending_outcomes: 'gauge',
  effectgate_proxy_events_total: 'counter',
};

describe('PrometheusMetrics', () => {
  it('counts decisions by verdict and tool, and times the overhead by verdict', async () => {
    const m = createPrometheusMetrics({ store: fixedStore({}), processMetrics: false });
    m.decision('allow', 'gh.create_issue', 2);
    m.decision('allow', 'gh.create_issue', 3);
    m.decision('duplicate', 'gh.create_issue', 0.4);
    m.decision('hold', 'slack.post', 1);
    const { text } = await m.scrape();
    expect(sample(text, 'effectgate_decisions_total{verdict="allow",tool="gh.create_issue"}')).toBe(2);
    expect(sample(text, 'effectgate_decisions_total{verdict="duplicate",tool="gh.create_issue"}')).toBe(1);
    expect(sample(text, 'effectgate_decisions_total{verdict="hold",tool="slack.post"}')).toBe(1);
    // Only combinations that happened are exposed.
    expect(text).not.toContain('verdict="halted"');
    expect(sample(text, 'effectgate_gate_overhead_seconds_count{verdict="allow"}')).toBe(2);
    expect(sample(text, 'effectgate_gate_overhead_seconds_sum{verdict="allow"}')).toBeCloseTo(0.005, 9);
    expect(sample(text, 'effectgate_gate_overhead_seconds_bucket{le="0.0005",verdict="duplicate"}')).toBe(1);
    expect(sample(text, 'effectgate_gate_overhead_seconds_bucket{le="0.0025",verdict="allow"}')).toBe(1);
    expect(sample(text, 'effectgate_gate_overhead_seconds_bucket{le="+Inf",verdict="allow"}')).toBe(2);
    for (const le of [...OVERHEAD_BUCKETS.map(String), '+Inf'])
      expect(sample(text, `effectgate_gate_overhead_seconds_bucket{le="${le}",verdict="hold"}`), le).toBe(
        Number(le) >= 0.001 || le === '+Inf' ? 1 : 0,
      );
  });

  it('times upstream dispatches by tool and outcome, with every bucket', async () => {
    const m = createPrometheusMetrics({ store: fixedStore({}), processMetrics: false });
    m.upstream('gh.create_issue', 'succeeded', 12);
    m.upstream('gh.create_issue', 'unknown', 40_000);
    const { text } = await m.scrape();
    const series = 'tool="gh.create_issue",outcome="succeeded"';
    for (const le of [...UPSTREAM_BUCKETS.map(String), '+Inf']) {
      const expected = le === '+Inf' || Number(le) >= 0.012 ? 1 : 0;
      expect(sample(text, `effectgate_upstream_duration_seconds_bucket{le="${le}",${series}}`), le).toBe(
        expected,
      );
    }
    expect(sample(text, `effectgate_upstream_duration_seconds_sum{${series}}`)).toBeCloseTo(0.012, 9);
    const unknown = 'tool="gh.create_issue",outcome="unknown"';
    expect(sample(text, `effectgate_upstream_duration_seconds_bucket{le="30",${unknown}}`)).toBe(0);
    expect(sample(text, `effectgate_upstream_duration_seconds_bucket{le="60",${unknown}}`)).toBe(1);
  });

  it("reads the proxy's own refusals at scrape time, by event", async () => {
    const m = createPrometheusMetrics({ store: fixedStore({}), processMetrics: false });
    expect(
      sample((await m.scrape()).text, 'effectgate_proxy_events_total{event="destinations_refused"}'),
    ).toBeUndefined();
    const counts = { connectionsRefusedPerClient: 2, destinationsRefused: 0 };
    m.countProxy(() => counts);
    let { text } = await m.scrape();
    expect(sample(text, 'effectgate_proxy_events_total{event="connections_refused_per_client"}')).toBe(2);
    expect(sample(text, 'effectgate_proxy_events_total{event="destinations_refused"}')).toBe(0);
    counts.destinationsRefused = 5;
    ({ text } = await m.scrape());
    expect(sample(text, 'effectgate_proxy_events_total{event="destinations_refused"}')).toBe(5);
  });

  it('counts outcomes the store could not take at once, and how many still wait', async () => {
    const m = createPrometheusMetrics({ store: fixedStore({}), processMetrics: false });
    m.deferredOutcome('queued');
    m.deferredOutcome('queued');
    m.deferredOutcome('queued');
    m.deferredOutcome('written');
    m.deferredOutcome('dropped');
    const { text } = await m.scrape();
    expect(sample(text, 'effectgate_deferred_outcomes_total{event="queued"}')).toBe(3);
    expect(sample(text, 'effectgate_deferred_outcomes_total{event="written"}')).toBe(1);
    expect(sample(text, 'effectgate_deferred_outcomes_total{event="dropped"}')).toBe(1);
    expect(sample(text, 'effectgate_pending_outcomes')).toBe(1);
  });

  it('counts reservation waits by tool and times them, and counts reconciliations by result', async () => {
    const m = createPrometheusMetrics({ store: fixedStore({}), processMetrics: false });
    m.reservationWait('gh.create_issue', 120);
    m.reservationWait('gh.create_issue', 1_500);
    m.reconciliation('gh.create_issue', 'match');
    m.reconciliation('gh.create_issue', 'inconclusive');
    m.reconciliation('gh.create_issue', 'inconclusive');
    const { text } = await m.scrape();
    expect(sample(text, 'effectgate_reservation_waits_total{tool="gh.create_issue"}')).toBe(2);
    expect(sample(text, 'effectgate_reservation_wait_seconds_count')).toBe(2);
    expect(sample(text, 'effectgate_reservation_wait_seconds_bucket{le="0.25"}')).toBe(1);
    expect(sample(text, 'effectgate_reservation_wait_seconds_bucket{le="2"}')).toBe(2);
    for (const le of [...RESERVATION_WAIT_BUCKETS.map(String), '+Inf'])
      expect(sample(text, `effectgate_reservation_wait_seconds_bucket{le="${le}"}`), le).toBeDefined();
    expect(sample(text, 'effectgate_reconciliations_total{tool="gh.create_issue",result="match"}')).toBe(1);
    expect(
      sample(text, 'effectgate_reconciliations_total{tool="gh.create_issue",result="inconclusive"}'),
    ).toBe(2);
  });

  it('serves text that parses: every sample matches the format, every effectgate metric has HELP and TYPE', async () => {
    const m = createPrometheusMetrics({ store: fixedStore({ unknown: 3, open: 1, succeeded: 9 }) });
    m.decision('allow', 'a.b', 1);
    m.upstream('a.b', 'failed', 5);
    m.reservationWait('a.b', 30);
    m.reconciliation('a.b', 'none');
    const { text, contentType } = await m.scrape();
    expect(contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
    for (const line of text.split('\n')) {
      if (line === '') continue;
      expect(line, line).toMatch(line.startsWith('#') ? COMMENT_LINE : SAMPLE_LINE);
    }
    const declared = new Map<string, string>();
    for (const line of text.split('\n')) {
      const t = /^# TYPE (\S+) (\S+)$/.exec(line);
      if (t) declared.set(t[1]!, t[2]!);
    }
    for (const [name, type] of Object.entries(GATE_METRICS)) {
      expect(declared.get(name), name).toBe(type);
      expect(text).toMatch(new RegExp(`^# HELP ${name} \\S`, 'm'));
    }
    // Process metrics, prefixed; every sample of the text belongs to a declared metric.
    expect(declared.get('effectgate_process_cpu_seconds_total')).toBe('counter');
    expect(declared.has('effectgate_nodejs_eventloop_lag_seconds')).toBe(true);
    for (const line of samples(text)) {
      const name = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)![0];
      const base = name.replace(/_(?:bucket|sum|count)$/, '');
      expect(declared.has(name) || declared.get(base) === 'histogram', name).toBe(true);
      expect(name.startsWith('effectgate_'), name).toBe(true);
    }
  });

  it('keeps a registry per instance, off the global one', async () => {
    const a = createPrometheusMetrics({ store: fixedStore({}) });
    const b = createPrometheusMetrics({ store: fixedStore({}) });
    a.decision('block', 't', 1);
    expect(sample((await a.scrape()).text, 'effectgate_decisions_total{verdict="block",tool="t"}')).toBe(1);
    expect((await b.scrape()).text).not.toContain('effectgate_decisions_total{');
    expect(globalRegistry.getMetricsAsArray().filter((m) => m.name.startsWith('effectgate_'))).toEqual([]);
  });

  it('counts unresolved operations at scrape time, once per cache period, shared by concurrent scrapes', async () => {
    let unknown = 2;
    const store = countingStore(async () => ({ unknown, open: 1, succeeded: 7 }));
    const m = createPrometheusMetrics({ store, processMetrics: false, storeCacheMs: 200 });
    expect(store.calls).toBe(0); // nothing until a scrape
    const texts = await Promise.all([m.scrape(), m.scrape(), m.scrape()]);
    expect(store.calls).toBe(1);
    for (const { text } of texts) {
      expect(sample(text, 'effectgate_unresolved_operations{state="unknown"}')).toBe(2);
      expect(sample(text, 'effectgate_unresolved_operations{state="open"}')).toBe(1);
      expect(sample(text, 'effectgate_store_up')).toBe(1);
    }
    unknown = 5;
    expect(sample((await m.scrape()).text, 'effectgate_unresolved_operations{state="unknown"}')).toBe(2);
    expect(store.calls).toBe(1);
    await new Promise((r) => setTimeout(r, 250));
    expect(sample((await m.scrape()).text, 'effectgate_unresolved_operations{state="unknown"}')).toBe(5);
    expect(store.calls).toBe(2);
  });

  it('still answers when the store fails or hangs: store_up 0, the gauges keep their last values', async () => {
    let mode: 'ok' | 'fail' | 'hang' = 'ok';
    const store = countingStore(() =>
      mode === 'ok'
        ? Promise.resolve({ unknown: 4, open: 2 })
        : mode === 'fail'
          ? Promise.reject(new Error('connection refused'))
          : new Promise<Counts>(() => {}),
    );
    const m = createPrometheusMetrics({ store, processMetrics: false, storeCacheMs: 0, storeTimeoutMs: 100 });
    expect(sample((await m.scrape()).text, 'effectgate_store_up')).toBe(1);
    mode = 'fail';
    let { text } = await m.scrape();
    expect(sample(text, 'effectgate_store_up')).toBe(0);
    expect(sample(text, 'effectgate_unresolved_operations{state="unknown"}')).toBe(4);
    mode = 'hang';
    const t0 = performance.now();
    ({ text } = await m.scrape());
    expect(performance.now() - t0).toBeLessThan(1_000);
    expect(sample(text, 'effectgate_store_up')).toBe(0);
    expect(sample(text, 'effectgate_unresolved_operations{state="open"}')).toBe(2);
    mode = 'ok';
    expect(sample((await m.scrape()).text, 'effectgate_store_up')).toBe(1);
  });

  it('treats a missing state as zero and exposes only unknown and open', async () => {
    const m = createPrometheusMetrics({ store: fixedStore({ succeeded: 3 }), processMetrics: false });
    const { text } = await m.scrape();
    expect(sample(text, 'effectgate_unresolved_operations{state="unknown"}')).toBe(0);
    expect(sample(text, 'effectgate_unresolved_operations{state="open"}')).toBe(0);
    expect(text).not.toContain('state="succeeded"');
  });

  it('records in microseconds once a tool is known (label children are made once per tool)', () => {
    const m = createPrometheusMetrics({ store: fixedStore({}), processMetrics: false });
    m.decision('allow', 'warm', 1);
    const n = 50_000;
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      m.decision('allow', 'warm', 1.2);
      m.upstream('warm', 'succeeded', 3.4);
    }
    const perRequestUs = ((performance.now() - t0) * 1000) / n;
    // A bound for a busy shared box (typically 1-3 µs for all three series of an allow); it catches
    // a regression to per-call label hashing of new children or anything that waits.
    expect(perRequestUs).toBeLessThan(50);
  });
});
