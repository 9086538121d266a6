/**
 * The benchmark's destination: a tiny keep-alive node:http server on loopback. POST answers 201
 * with a small JSON `{"html_url": …}` (what the bench tool reads as its result ref), anything else
 * 200. Run as its own process (`node --import tsx bench/upstream-server.ts`) so it never shares an
 * event loop with the load generator; prints `upstream listening on 127.0.0.1:PORT`.
 * With BENCH_TLS_CERT and BENCH_TLS_KEY (PEM files) it speaks HTTPS (HTTP/1.1) instead.
 */
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';

const CREATED = Buffer.from('{"html_url":"http://127.0.0.1/acme/api/issues/1","number":1}');
const OK = Buffer.from('{"ok":true}');

function answer(req: IncomingMessage, res: ServerResponse): void {
  const body = req.method === 'POST' ? CREATED : OK;
  res.writeHead(req.method === 'POST' ? 201 : 200, {
    'content-type': 'application/json',
    'content-length': String(body.byteLength),
  });
  res.end(body);
}

const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
  // Read the whole request body first, as a real API would, then answer.
  req.once('end', () => answer(req, res));
  req.resume();
};
const certFile = process.env['BENCH_TLS_CERT'];
const keyFile = process.env['BENCH_TLS_KEY'];
const server =
  certFile && keyFile
    ? createHttpsServer(
        {
          cert: readFileSync(certFile),
          key: readFileSync(keyFile),
          keepAlive: true,
          keepAliveTimeout: 60_000,
        },
        onRequest,
      )
    : createHttpServer({ keepAlive: true, keepAliveTimeout: 60_000 }, onRequest);
server.keepAliveTimeout = 60_000;
server.headersTimeout = 65_000;

server.listen(0, '127.0.0.1', () => {
  const addr = server.address() as AddressInfo;
  process.stdout.write(`upstream listening on ${addr.address}:${addr.port}\n`);
});

const stop = (): void => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
// The bench closes our stdin when it goes away: never outlive it.
process.stdin.on('end', stop);
process.stdin.resume();
