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
 * `node --import tsx bench/floor-proxy.ts <postgres url>`; prints `floor proxy listening on
 * 127.0.0.1:PORT`; stops when its stdin ends (the bench went away) or on SIGTERM.
 */
import { createHash } from 'node:crypto';
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
  const reserved = await db.query({ ...RESERVE, values: [key] });
  if (reserved.rowCount === 0) {
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
  await db.query({ ...SETTLE, values: [key, ok ? 'confirmed' : 'released'] });
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
