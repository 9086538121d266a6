/**
 * The forward proxy's own JavaScript per ungoverned request, alone (no sockets): `resolveRequest`
 * (target, head normalization, identity), `gate.route` (classification, near miss, `_method`
 * body check, read-backs) and the answer's header copy (`stripHopByHop`, `withoutGateHeaders`),
 * for the bench's ungoverned request (POST to a governed host on a path no tool matches). CPU time
 * per request, five rounds; little moved by other load on the machine, unlike the bench's req/s.
 *
 *   node --import tsx bench/forward-alone.ts [checkout=.] [requests per round=300000]
 *
 * `checkout` is any built checkout (its `dist/`), so a base commit and the head can be alternated.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const root = resolve(process.argv[2] ?? '.');
const rounds = 5;
const perRound = Number(process.argv[3] ?? 300_000);
const load = (file: string): Promise<Record<string, unknown>> =>
  import(pathToFileURL(resolve(root, 'dist', file)).href) as Promise<Record<string, unknown>>;

// biome-ignore-start lint/suspicious/noExplicitAny: another checkout's dist, typed as it was then.
type Any = any;
// biome-ignore-end lint/suspicious/noExplicitAny: another checkout's dist, typed as it was then.
const store: Any = await ((await load('store/index.js')).openStore as Any)({ url: 'pglite:memory' });
const engine: Any = await load('engine/index.js');
const { resolveRequest }: Any = await load('proxy/forward-handler.js');
const { TunnelSockets }: Any = await load('proxy/tunnel-sockets.js');
const gate: Any = await engine.createGate({
  policies: resolve(import.meta.dirname, 'policies'),
  store,
  scope: { tenant: 'bench', area: 'bench', agent: 'bench-forward' },
});
const tunnels = new TunnelSockets();
const socket = { remoteAddress: '127.0.0.1' };
const req = {
  url: 'http://127.0.0.1:40000/repos/acme/api/comments',
  method: 'POST',
  socket,
  headers: {
    host: '127.0.0.1:40000',
    'content-type': 'application/json',
    'content-length': '1000',
    connection: 'keep-alive',
  },
};
const answer = {
  'content-type': 'application/json',
  'content-length': '60',
  date: 'Fri, 04 Dec 2026 18:00:00 GMT',
  connection: 'keep-alive',
  'keep-alive': 'timeout=60',
};
const copyAnswer = (h: Any): Any =>
  engine.withoutGateHeaders === undefined
    ? engine.stripHopByHop(h)
    : engine.withoutGateHeaders(engine.stripHopByHop(h));

function one(): Any {
  const r = resolveRequest(gate, req, socket, tunnels, undefined);
  const d = gate.route(r.head);
  if (d.kind !== 'pass') throw new Error(`bench: the ungoverned request was routed ${d.kind}`);
  return copyAnswer(answer);
}

for (let i = 0; i < 200_000; i++) one();
const figures: string[] = [];
for (let k = 0; k < rounds; k++) {
  const c0 = process.cpuUsage();
  for (let i = 0; i < perRound; i++) one();
  const c = process.cpuUsage(c0);
  figures.push((((c.user + c.system) / perRound) * 1000).toFixed(0));
}
console.log(
  `${root}: ns of CPU per ungoverned request (${rounds} rounds of ${perRound}): ${figures.join(' ')}`,
);
await gate.close?.();
await store.close();
process.exit(0);
