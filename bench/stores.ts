/**
 * Stores for the benchmark: a fresh PostgreSQL database per run (created through the admin URL,
 * dropped afterwards) and a PGlite directory; plus the store round-trip reference measurement.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { percentileOf } from './load.js';

export interface BenchDatabase {
  readonly name: string;
  readonly url: string;
  drop(): Promise<void>;
}

export interface RoundTrip {
  readonly what: string;
  readonly samples: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]', '::1']);

/** Refuses anything but a loopback PostgreSQL: the benchmark never talks to other hosts. */
export function assertLoopback(url: string): void {
  const host = new URL(url).hostname;
  if (!LOOPBACK.has(host)) throw new Error(`bench: ${url} is not a loopback address`);
}

/**
 * Creates `eg_bench_<random>` through `adminUrl`. Resolves `null` (with the reason) when the
 * server is unreachable, so the caller can skip the PostgreSQL scenarios.
 */
export async function createBenchDatabase(
  adminUrl: string,
): Promise<{ db: BenchDatabase; skipped: null } | { db: null; skipped: string }> {
  assertLoopback(adminUrl);
  const admin = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 3_000 });
  try {
    await admin.connect();
  } catch (err) {
    await admin.end().catch(() => {});
    return { db: null, skipped: `${adminUrl} unreachable (${err instanceof Error ? err.message : err})` };
  }
  const name = `eg_bench_${randomBytes(5).toString('hex')}`;
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  let dropped = false;
  return {
    skipped: null,
    db: {
      name,
      url: url.toString(),
      async drop(): Promise<void> {
        if (dropped) return;
        dropped = true;
        const c = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 3_000 });
        await c.connect();
        try {
          await c.query(`drop database if exists ${name} with (force)`);
        } finally {
          await c.end();
        }
      },
    },
  };
}

/** p50/p99 of `select 1` over one pg connection, sequential, after a short warm-up. */
/**
 * The store a bench runs on: `pglite` is the embedded store in memory, anything else a PostgreSQL
 * admin URL on loopback, on which a fresh database is made (dropped by `drop`).
 */
export async function benchStoreUrl(
  target: string,
): Promise<{ readonly url: string; drop(): Promise<void> }> {
  if (target === 'pglite') return { url: 'pglite:memory', drop: async () => {} };
  const made = await createBenchDatabase(target);
  if (made.db === null) throw new Error(`bench: ${made.skipped}`);
  return { url: made.db.url, drop: () => made.db.drop() };
}

export async function measurePostgresRoundTrip(url: string, samples = 2_000): Promise<RoundTrip> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (let i = 0; i < 200; i++) await client.query('select 1');
    const t = new Float64Array(samples);
    for (let i = 0; i < samples; i++) {
      const t0 = performance.now();
      await client.query('select 1');
      t[i] = performance.now() - t0;
    }
    return {
      what: 'PostgreSQL select 1 (pg, loopback)',
      samples,
      p50Ms: percentileOf(t, 0.5),
      p99Ms: percentileOf(t, 0.99),
    };
  } finally {
    await client.end();
  }
}

/**
 * The same for an in-memory PGlite in this process: not a network round trip, but the fixed cost
 * of one query through the WASM engine, the floor under every PGlite store call.
 */
export async function measurePgliteQuery(samples = 2_000): Promise<RoundTrip> {
  const { PGlite } = await import('@electric-sql/pglite');
  const db = new PGlite();
  try {
    for (let i = 0; i < 200; i++) await db.query('select 1');
    const t = new Float64Array(samples);
    for (let i = 0; i < samples; i++) {
      const t0 = performance.now();
      await db.query('select 1');
      t[i] = performance.now() - t0;
    }
    return {
      what: 'PGlite select 1 (in-memory, in-process)',
      samples,
      p50Ms: percentileOf(t, 0.5),
      p99Ms: percentileOf(t, 0.99),
    };
  } finally {
    await db.close();
  }
}

/** A fresh temporary directory for one PGlite store. */
export async function pgliteDir(): Promise<{ dir: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'eg-bench-pglite-'));
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}
