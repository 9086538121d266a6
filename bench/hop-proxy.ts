/**
 * The bare undici hop, a reference for the ungoverned path: the least a node:http + undici forward
 * proxy does for an absolute-form request. Per request it parses the target, copies the request
 * headers without the hop-by-hop ones (RFC 9110 §7.6.1, `Connection` tokens included) and streams
 * the body through one undici `Agent` (`stream()`, as the gate's ungoverned path does), writing the
 * answer's head without its hop-by-hop fields. No policies, no egress check, no admission, no
 * logging: what effectgate's ungoverned path costs beyond this is the gate's own.
 *
 * `node --import tsx bench/hop-proxy.ts`; prints `hop proxy listening on 127.0.0.1:PORT`; stops
 * when its stdin ends (the bench went away) or on SIGTERM.
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent } from 'undici';

const HOP_BY_HOP = new Set([
  'connection',
  'proxy-connection',
  'keep-alive',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

const agent = new Agent({ connections: null, pipelining: 1 });

function endToEnd(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const named = headers.connection?.toLowerCase().split(',') ?? [];
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined || HOP_BY_HOP.has(k) || named.some((n) => n.trim() === k)) continue;
    out[k] = v;
  }
  return out;
}

function fail(res: ServerResponse, status: number, why: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { 'content-type': 'text/plain', 'content-length': String(Buffer.byteLength(why)) });
  res.end(why);
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  let target: URL;
  try {
    target = new URL(req.url ?? '');
  } catch {
    fail(res, 400, 'absolute-form target expected');
    return;
  }
  const hasBody =
    req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined;
  agent
    .stream(
      {
        origin: target.origin,
        path: `${target.pathname}${target.search}`,
        method: (req.method ?? 'GET') as 'POST',
        headers: endToEnd(req.headers),
        body: hasBody ? req : null,
        opaque: res,
      },
      ({ statusCode, headers, opaque }) => {
        const out = opaque as ServerResponse;
        out.writeHead(statusCode, endToEnd(headers as IncomingHttpHeaders));
        return out;
      },
    )
    .catch((err: unknown) => fail(res, 502, String(err)));
}

const server = createServer({ keepAlive: true, keepAliveTimeout: 60_000 }, handle);
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  const addr = server.address() as AddressInfo;
  process.stdout.write(`hop proxy listening on ${addr.address}:${addr.port}\n`);
});

const stop = (): void => {
  server.close();
  server.closeAllConnections();
  void agent.close().finally(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.stdin.on('end', stop);
process.stdin.resume();
