import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Store } from '../store/index.js';

export interface AdminServer {
  readonly server: Server;
  listen(host: string, port: number): Promise<AddressInfo>;
  close(): Promise<void>;
}

/**
 * The admin server, off the agent's path. For now: `/healthz` (process up) and `/readyz` (store
 * reachable). The operations API, metrics and the timeline page come with the investigation work.
 */
export function createAdminServer(options: { readonly store: Store }): AdminServer {
  const server = createServer((req, res) => {
    const send = (status: number, body: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end(JSON.stringify(body));
    };
    if (req.method !== 'GET') return send(405, { error: 'method not allowed' });
    if (req.url === '/healthz') return send(200, { status: 'ok' });
    if (req.url === '/readyz') {
      options.store.ping().then(
        () => send(200, { status: 'ready', store: options.store.kind }),
        () => send(503, { status: 'store unreachable', store: options.store.kind }),
      );
      return;
    }
    send(404, { error: 'not found' });
  });
  return {
    server,
    listen: (host, port) =>
      new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => resolve(server.address() as AddressInfo));
      }),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
