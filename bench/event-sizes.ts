/**
 * What one governed call writes to the trail, event by event: a real gate in process (createGate
 * with bench/policies, the undici interceptor) on a scratch PostgreSQL database sends one issue
 * (allow, then its outcome) and its repeat from another run (duplicate) to a loopback upstream, and
 * prints each event's payload length and the bytes PostgreSQL stores for it (`pg_column_size`: a
 * row over about 2 KB is compressed in place, one under it is not).
 *
 * `node --import tsx bench/event-sizes.ts [postgres admin url]`
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import pg from 'pg';
import { Agent } from 'undici';
import { createGate } from '../src/engine/index.js';
import { openStore } from '../src/store/index.js';
import { gateInterceptor } from '../src/undici/index.js';
import { createBenchDatabase } from './stores.js';

const adminUrl = process.argv[2] ?? 'postgres://postgres@127.0.0.1:5432/test';
const made = await createBenchDatabase(adminUrl);
if (made.db === null) throw new Error(`event-sizes: ${made.skipped}`);
const db = made.db;
const upstream = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(201, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ id: 1, html_url: 'http://127.0.0.1/acme/api/issues/1' }));
  });
});
await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
const port = (upstream.address() as { port: number }).port;
const store = await openStore({ url: db.url });
try {
  const gate = await createGate({
    policies: new URL('./policies', import.meta.url).pathname,
    store,
    scope: { tenant: 'bench', area: 'bench', agent: 'bench-event-sizes' },
    // A gate on PostgreSQL takes its authority key from outside the database.
    authorityKey: randomBytes(32).toString('hex'),
  });
  const agent = new Agent().compose(gateInterceptor(gate));
  for (const run of ['first', 'repeat']) {
    const res = await agent.request({
      origin: `http://127.0.0.1:${port}`,
      path: '/repos/acme/api/issues',
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-effectgate-run': `event-sizes-${run}` },
      body: JSON.stringify({ title: 'event sizes', body: 'x'.repeat(900) }),
    });
    await res.body.text();
    if (res.statusCode !== (run === 'first' ? 201 : 409)) throw new Error(`${run}: ${res.statusCode}`);
  }
  await gate.close();
  await agent.close();
} finally {
  await store.close();
  upstream.close();
}
const client = new pg.Client({ connectionString: db.url });
await client.connect();
try {
  const { rows } = await client.query<{ type: string; chars: number; stored: number }>(
    `select type, length(payload) as chars, pg_column_size(payload) as stored
       from events order by recorded_at_us`,
  );
  console.log('event                 payload chars   stored bytes');
  for (const r of rows) {
    console.log(`${r.type.padEnd(22)}${String(r.chars).padStart(13)}${String(r.stored).padStart(15)}`);
  }
} finally {
  await client.end();
  await db.drop();
}
