/**
 * The benchmark's destination: a tiny keep-alive node:http server on loopback. POST answers 201
 * with a small JSON `{"html_url": …}` (what the bench tool reads as its result ref), anything else
 * 200. Run as its own process (`node --import tsx bench/upstream-server.ts`) so it never shares an
 * event loop with the load generator; prints `upstream listening on 127.0.0.1:PORT` (then any
 * other address of BENCH_LISTEN_HOSTS, same port). With BENCH_TLS_CERT and BENCH_TLS_KEY (PEM
 * files) it speaks HTTPS (HTTP/1.1) instead.
 */
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';

type Server = ReturnType<typeof createHttpServer> | ReturnType<typeof createHttpsServer>;

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
/**
 * BENCH_LISTEN_HOSTS (comma-separated loopback addresses, default 127.0.0.1): one listener per
 * address, all on the same port, so that one upstream is reached under several destinations (the
 * HTTPS one also on 127.0.0.2, an address no bench tool names, for the tunnel scenario).
 */
const hosts = (process.env['BENCH_LISTEN_HOSTS'] ?? '127.0.0.1').split(',').filter((h) => h !== '');

function makeServer(): Server {
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
  return server;
}

function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

const servers: Server[] = [];

/** The first address takes any free port; the others must get the same one (else start over). */
async function listenAll(): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    let port = 0;
    try {
      for (const host of hosts) {
        const server = makeServer();
        servers.push(server);
        port = await listen(server, port, host);
      }
      return port;
    } catch (err) {
      for (const s of servers.splice(0)) s.close();
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt >= 10) throw err;
    }
  }
}

listenAll().then(
  (port) => {
    process.stdout.write(`upstream listening on ${hosts.map((h) => `${h}:${port}`).join(', ')}\n`);
  },
  (err: unknown) => {
    process.stderr.write(`upstream: cannot listen on ${hosts.join(', ')}: ${String(err)}\n`);
    process.exit(1);
  },
);

const stop = (): void => {
  let open = servers.length;
  if (open === 0) process.exit(0);
  for (const server of servers) {
    server.close(() => {
      if (--open === 0) process.exit(0);
    });
    server.closeAllConnections();
  }
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
// The bench closes our stdin when it goes away: never outlive it.
process.stdin.on('end', stop);
process.stdin.resume();
