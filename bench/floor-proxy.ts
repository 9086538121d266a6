/**
 * The physical floor of a governed call, as a reference scenario: the least a gate can
 * do and still reserve before and confirm after. A plain `node:http` forward proxy for
 * absolute-form requests that, per request, reads the JSON body, hashes its `title` into a key,
 * makes ONE PostgreSQL round trip to reserve it (`insert … on conflict do nothing`: a taken key is
 * answered 409 duplicate with nothing sent), forwards through an undici Pool with an
 * `Idempotency-Key`, and makes ONE round trip to confirm (or release) it before answering. No
 * policies, no trail, no hash chain, no lineage: what effectgate adds over this is what its figures
 * are compared with. Same pool size as the gate (16).
 *
 * With `BENCH_FLOOR_TRAIL=chained` it is the floor of a governed call *with a tamper-evident
 * trail*: each of the two round trips is still one statement, which also appends one event to a
 * hash-chained log (64 chains, the head row locked from its update to the commit, the event's hash
 * over the previous one and its payload, made by PostgreSQL's `sha256`), the reservation's event
 * carrying proposal facts of the size effectgate's decision event has once compressed (about 1.3
 * KB) and the confirmation's those of an outcome event (about 0.8 KB). No functions, no other row:
 * the least an append-only trail chained as it is written can cost on top of the floor. With
 * `BENCH_FLOOR_TRAIL=events` the same events go to a log ordered by a sequence, unchained and
 * unlocked: what a trail sealed only afterwards (by a sealer, off the call) would leave on the call.
 *
 * `node --import tsx bench/floor-proxy.ts <postgres url>`; prints `floor proxy listening on
 * 127.0.0.1:PORT`; stops when its stdin ends (the bench went away) or on SIGTERM.
 */
import { createHash, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { Pool as HttpPool } from 'undici';

const url = process.argv[2];
if (url === undefined) {
  process.stderr.write('usage: floor-proxy.ts <postgres url>\n');
  process.exit(2);
}
const db = new pg.Pool({ connectionString: url, max: 16 });
await db.query(
  `create table if not exists floor_keys (key_hash text primary key, state text not null,
     created_at timestamptz not null default now())`,
);

const upstreams = new Map<string, HttpPool>();
const upstreamFor = (origin: string): HttpPool => {
  let p = upstreams.get(origin);
  if (p === undefined) {
    p = new HttpPool(origin, { connections: 64, pipelining: 1 });
    upstreams.set(origin, p);
  }
  return p;
};

const RESERVE = {
  name: 'floor_reserve',
  text: `insert into floor_keys (key_hash, state) values ($1, 'pending') on conflict (key_hash) do nothing
    returning key_hash`,
};
const SETTLE = { name: 'floor_settle', text: 'update floor_keys set state = $2 where key_hash = $1' };

/** BENCH_FLOOR_TRAIL: `chained` (a hash-chained event per round trip), `events` (an unchained one), or none. */
const TRAIL = ((v) => (v === 'chained' || v === 'events' ? v : null))(process.env['BENCH_FLOOR_TRAIL']);
const CHAINS = 64;
if (TRAIL === 'chained') {
  await db.query(
    `create table if not exists floor_chain (id int primary key, seq bigint not null, hash text not null);
     insert into floor_chain select g, 0, repeat('0', 64) from generate_series(0, ${CHAINS - 1}) g
       on conflict do nothing;
     create table if not exists floor_events (chain int not null, seq bigint not null, key_hash text not null,
       payload text not null, prev_hash text not null, hash text not null,
       recorded_at timestamptz not null default now(), primary key (chain, seq))`,
  );
} else if (TRAIL === 'events') {
  await db.query(
    `create table if not exists floor_log (id bigint generated always as identity primary key,
       key_hash text not null, payload text not null, recorded_at timestamptz not null default now())`,
  );
}
// The key's change and the event in one statement. Chained: the head row's update takes the
// chain's lock (held to the commit, so a chain's committed events are a gap-free prefix) and makes
// the hash. Unchained: the event takes its order from a sequence, and nothing is locked for it.
const appendTo = (keyStep: string): string =>
  TRAIL === 'chained'
    ? `with k as (${keyStep} returning key_hash),
  h as (update floor_chain set seq = seq + 1,
      hash = encode(sha256(convert_to(hash || E'\\n' || (seq + 1)::text || E'\\n' || $2, 'UTF8')), 'hex')
    where id = $3::int returning id, seq, hash),
  e as (insert into floor_events (chain, seq, key_hash, payload, prev_hash, hash)
    select h.id, h.seq, $1, $2, (select f.hash from floor_chain f where f.id = h.id), h.hash from h)
  select count(*) as n from k`
    : `with k as (${keyStep} returning key_hash),
  e as (insert into floor_log (key_hash, payload) select $1, $2 where $3::int is not null)
  select count(*) as n from k`;
const RESERVE_TRAIL = {
  name: 'floor_reserve_trail',
  text: appendTo(
    `insert into floor_keys (key_hash, state) values ($1, 'pending') on conflict (key_hash) do nothing`,
  ),
};
const SETTLE_TRAIL = {
  name: 'floor_settle_trail',
  text: appendTo('update floor_keys set state = $4 where key_hash = $1'),
};
const id = (): string => randomUUID();
/** Proposal facts as a decision event carries them, with fresh ids: about 1.3 KB. */
function proposalFacts(key: string, target: URL, fingerprint: string): string {
  return JSON.stringify({
    type: 'decision.allow',
    runId: `auto-${id()}`,
    scope: { tenant: 'bench', area: 'bench', agent: 'bench-floor' },
    toolId: 'bench.create_issue',
    route: `POST ${target.host} /repos/{owner}/{repo}/issues`,
    request: { method: 'POST', host: target.host, path: target.pathname, fingerprint },
    derivedClient: 'vm/in-process/bench/bench/bench-floor',
    decisionId: id(),
    key: {
      hash: key,
      values: ['acme', 'api', key.slice(7, 40)],
      windowMs: 86_400_000,
      pendingTtlMs: 120_000,
    },
    operationId: id(),
    attemptId: id(),
    idempotency: { header: 'Idempotency-Key', key: id(), agentKeyMode: 'keep' },
    retryBudget: 3,
    unknownRule: 'hold',
    onExpired: 'unknown',
    gateInstance: 'vm/in-process/bench/bench/bench-floor',
    deadlineMs: 108_000,
    decision: {
      verdict: 'allow',
      decidedAt: new Date().toISOString(),
      keyExpiresAt: new Date().toISOString(),
    },
    attempt: { number: 1, attemptBudget: 3, remainingAttempts: 2, fingerprint },
    padding: 'x'.repeat(300),
  });
}
/** Outcome facts as an outcome event carries them: about 0.8 KB. */
function outcomeFacts(key: string, status: number, text: string): string {
  return JSON.stringify({
    type: 'attempt.outcome',
    operationId: id(),
    attemptId: id(),
    decisionId: id(),
    keyHash: key,
    windowMs: 86_400_000,
    durationMs: 2.5,
    dispatchState: 'response_received',
    status,
    responseFingerprint: `sha256:${createHash('sha256').update(text).digest('hex')}`,
    operationState: status < 300 ? 'succeeded' : 'failed',
    destinationRef: 'http://127.0.0.1/acme/api/issues/1',
    outcomeRule: `status ${status}`,
    finishedAt: new Date().toISOString(),
    stateChange: { from: 'open', to: status < 300 ? 'succeeded' : 'failed' },
    key: {
      state: 'confirmed',
      confirmedAt: new Date().toISOString(),
      windowEndsAt: new Date().toISOString(),
    },
  });
}
/** The chain of a key: the first byte of its hash mod 64, as eg_chain_of takes an id's sha256's first byte. */
const chainOf = (key: string): number => Number.parseInt(key.slice(7, 9), 16) % CHAINS;

function reply(res: ServerResponse, status: number, body: string, verdict: string): void {
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(body)),
    'effectgate-verdict': verdict,
  });
  res.end(body);
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const body = Buffer.concat(chunks);
  const target = new URL(req.url ?? '/');
  const title = String((JSON.parse(body.toString('utf8')) as { title?: unknown }).title);
  const key = `sha256:${createHash('sha256').update(`acme\0${target.pathname}\0${title}`).digest('hex')}`;
  const reserved =
    TRAIL !== null
      ? await db.query<{ n: string }>({
          ...RESERVE_TRAIL,
          values: [
            key,
            proposalFacts(key, target, `sha256:${createHash('sha256').update(body).digest('hex')}`),
            chainOf(key),
          ],
        })
      : await db.query({ ...RESERVE, values: [key] });
  if (TRAIL !== null ? reserved.rows[0]?.n === '0' : reserved.rowCount === 0) {
    reply(res, 409, '{"verdict":"duplicate"}', 'duplicate');
    return;
  }
  const headers: Record<string, string> = { 'idempotency-key': key };
  for (const [k, v] of Object.entries(req.headers)) {
    if (typeof v === 'string' && k !== 'connection' && k !== 'proxy-connection' && k !== 'keep-alive')
      headers[k] = v;
  }
  const answer = await upstreamFor(target.origin).request({
    method: (req.method ?? 'POST') as 'POST',
    path: `${target.pathname}${target.search}`,
    headers,
    body,
  });
  const text = await answer.body.text();
  const ok = answer.statusCode >= 200 && answer.statusCode < 300;
  if (TRAIL !== null)
    await db.query({
      ...SETTLE_TRAIL,
      values: [key, outcomeFacts(key, answer.statusCode, text), chainOf(key), ok ? 'confirmed' : 'released'],
    });
  else await db.query({ ...SETTLE, values: [key, ok ? 'confirmed' : 'released'] });
  reply(res, answer.statusCode, text, 'allow');
}

const server = createServer({ keepAlive: true, keepAliveTimeout: 60_000 }, (req, res) => {
  handle(req, res).catch((err: unknown) => {
    if (!res.headersSent) reply(res, 502, JSON.stringify({ error: String(err) }), 'error');
    else res.destroy();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  const addr = server.address() as AddressInfo;
  process.stdout.write(`floor proxy listening on ${addr.address}:${addr.port}\n`);
});

const stop = (): void => {
  server.close();
  server.closeAllConnections();
  void Promise.all([db.end(), ...[...upstreams.values()].map((p) => p.close())]).finally(() =>
    process.exit(0),
  );
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.stdin.on('end', stop);
process.stdin.resume();
