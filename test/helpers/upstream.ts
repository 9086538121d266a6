/**
 * A real loopback HTTP upstream for tests: records every request (method, url, headers, body) and
 * answers through a pluggable handler. Helpers build the usual behaviours: a status with JSON, a
 * delay, a reply that never comes, and "commit then destroy" (read the request, then cut the
 * socket: the request may have had its effect, but no response arrives).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface RecordedRequest {
  readonly method: string;
  /** Request target as received (origin-form for a proxied request). */
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  /** Header names exactly as sent on the wire, in order. */
  readonly rawHeaderNames: readonly string[];
  readonly body: Buffer;
}

export type UpstreamHandler = (
  request: RecordedRequest,
  res: ServerResponse,
  req: IncomingMessage,
) => void | Promise<void>;

export interface UpstreamOptions {
  /** Serve HTTPS with this key pair (see `selfSignedCert()`). */
  readonly tls?: { readonly key: string; readonly cert: string };
  /**
   * The loopback address to listen on (default 127.0.0.1). Another one (127.0.0.2) is a host no
   * tool on 127.0.0.1 names, under any name: `localhost` is 127.0.0.1 to the gate too.
   */
  readonly host?: string;
}

export interface Upstream {
  /** `http://127.0.0.1:<port>` (`https://` with `tls`). */
  readonly url: string;
  readonly port: number;
  readonly requests: RecordedRequest[];
  /** Connections accepted so far. */
  readonly connections: () => number;
  close(): Promise<void>;
}

/** Answers `status` with a JSON body (default: `{ ok: true, method, url }`). */
export function reply(status = 200, json?: unknown, headers: Record<string, string> = {}): UpstreamHandler {
  return (request, res) => {
    const body = JSON.stringify(json ?? { ok: true, method: request.method, url: request.url });
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      ...headers,
    });
    res.end(body);
  };
}

/**
 * A JSON-RPC endpoint: answers HTTP 200 with the JSON-RPC response `answer` gives for the parsed
 * request (default `{ result: { content: [] } }`), carrying the request's own `id`; with
 * `sse: true` as one `message` event of a `text/event-stream`, as MCP streamable HTTP may.
 */
export function jsonRpcReply(
  answer: (request: {
    id?: unknown;
    method?: unknown;
    params?: unknown;
  }) => Record<string, unknown> = () => ({
    result: { content: [] },
  }),
  options: { readonly sse?: boolean } = {},
): UpstreamHandler {
  return (request, res) => {
    const rpc = JSON.parse(request.body.toString('utf8')) as { id?: unknown };
    const body = JSON.stringify({ jsonrpc: '2.0', id: rpc.id ?? null, ...answer(rpc) });
    const payload = options.sse === true ? `event: message\ndata: ${body}\n\n` : body;
    res.writeHead(200, {
      'content-type': options.sse === true ? 'text/event-stream' : 'application/json',
      'content-length': Buffer.byteLength(payload),
    });
    res.end(payload);
  };
}

/** Echoes the request body back with its content type. */
export function echo(): UpstreamHandler {
  return (request, res) => {
    res.writeHead(200, {
      'content-type': request.headers['content-type'] ?? 'application/octet-stream',
      'content-length': request.body.length,
    });
    res.end(request.body);
  };
}

/** Runs `then` after `ms` milliseconds. */
export function delay(ms: number, then: UpstreamHandler = reply()): UpstreamHandler {
  return (request, res, req) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(() => resolve(then(request, res, req)), ms);
      res.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
    });
}

/** Reads the whole request (its effect "happens"), then destroys the socket without answering. */
export function commitThenDestroy(): UpstreamHandler {
  return (_request, _res, req) => {
    req.socket.destroy();
  };
}

/** Reads the whole request and never answers (until the client gives up or the server closes). */
export function neverAnswer(): UpstreamHandler {
  return () => {};
}

export interface SelfSignedCert {
  readonly key: string;
  /** PEM; also the trust anchor to give clients (`ca`). */
  readonly cert: string;
}

const cachedCerts = new Map<string, SelfSignedCert>();

/**
 * A self-signed certificate for `localhost`, `127.0.0.1` and `127.0.0.2` (or for the DNS names
 * given: a stand-in for a real API, `api.github.com`), made once per process and names with openssl.
 */
export function selfSignedCert(names?: readonly string[]): SelfSignedCert {
  const san =
    names === undefined
      ? 'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:127.0.0.2'
      : `subjectAltName=${names.map((n) => `DNS:${n}`).join(',')}`;
  const cached = cachedCerts.get(san);
  if (cached !== undefined) return cached;
  const dir = mkdtempSync(join(tmpdir(), 'effectgate-cert-'));
  try {
    const key = join(dir, 'key.pem');
    const cert = join(dir, 'cert.pem');
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '2'].concat([
        '-subj',
        `/CN=${names?.[0] ?? 'localhost'}`,
        '-addext',
        san,
      ]),
      { stdio: 'ignore' },
    );
    const made = { key: readFileSync(key, 'utf8'), cert: readFileSync(cert, 'utf8') };
    cachedCerts.set(san, made);
    return made;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function startUpstream(
  handler: UpstreamHandler = reply(),
  options: UpstreamOptions = {},
): Promise<Upstream> {
  const requests: RecordedRequest[] = [];
  const sockets = new Set<Socket>();
  let connections = 0;
  const listener = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('error', () => {});
    req.on('end', () => {
      const recorded: RecordedRequest = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        rawHeaderNames: req.rawHeaders.filter((_, i) => i % 2 === 0),
        body: Buffer.concat(chunks),
      };
      requests.push(recorded);
      Promise.resolve(handler(recorded, res, req)).catch(() => res.destroy());
    });
  };
  const server =
    options.tls === undefined ? createServer(listener) : createHttpsServer(options.tls, listener);
  server.on('connection', (socket: Socket) => {
    connections += 1;
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  const host = options.host ?? '127.0.0.1';
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `${options.tls === undefined ? 'http' : 'https'}://${host}:${port}`,
    port,
    requests,
    connections: () => connections,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
  };
}
