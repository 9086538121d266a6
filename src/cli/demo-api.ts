import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';

/** One issue the fake tracker created: an effect in its ledger. */
export interface DemoIssue {
  readonly id: number;
  readonly number: number;
  readonly title: string;
  readonly html_url: string;
  /** The `Idempotency-Key` the creating request carried, or `null`. */
  readonly idempotencyKey: string | null;
}

/** One POST that reached the fake tracker, and what it did with it. */
export interface DemoPost {
  readonly idempotencyKey: string | null;
  /** `replayed`: answered from an earlier POST with the same key, nothing created. */
  readonly result: 'created' | 'replayed' | 'refused';
  /** The issue it created or replayed. */
  readonly issue: DemoIssue | null;
  /** The effect was done and the connection cut before the answer (`dropNextResponse`). */
  readonly dropped: boolean;
}

/** What the fake tracker saw: its effects (the issues it created) and every POST that reached it. */
export interface DemoLedger {
  readonly issues: readonly DemoIssue[];
  readonly posts: readonly DemoPost[];
}

/** Request bodies larger than this are refused: the demo's issues are one short title. */
const MAX_BODY_BYTES = 64 * 1024;

const ISSUES = /^\/repos\/([A-Za-z0-9._-]{1,100})\/([A-Za-z0-9._-]{1,100})\/issues$/;

/**
 * The fake issue tracker of `effectgate demo`, on 127.0.0.1 only and in memory only:
 *
 *   POST /repos/:owner/:repo/issues  `{ "title": "…" }` → 201 `{ id, number, title, html_url }`
 *   GET  /repos/:owner/:repo/issues  → 200, the repository's issues
 *
 * It honours `Idempotency-Key` the way a careful real API does: a key seen before with the same
 * body replays the stored issue (`Idempotent-Replayed: true`) and creates nothing; with another body
 * it is refused (422). `dropNextResponse()` makes the next POST do its effect and then cut the
 * connection before any answer, the failure that leaves an agent unable to tell what happened.
 */
export class DemoApi {
  readonly #server: Server;
  readonly #issues: DemoIssue[] = [];
  readonly #byKey = new Map<string, { readonly body: string; readonly issue: DemoIssue }>();
  readonly #posts: DemoPost[] = [];
  #dropNext = false;
  #base = '';

  readonly #onPost: ((post: DemoPost) => void) | undefined;

  private constructor(
    onPost?: (post: DemoPost) => void,
    tls?: { readonly key: string; readonly cert: string },
  ) {
    this.#onPost = onPost;
    const handler = (req: IncomingMessage, res: ServerResponse): void => {
      this.#handle(req, res).catch(() => res.destroy());
    };
    this.#server = tls === undefined ? createServer(handler) : createHttpsServer(tls, handler);
  }

  /**
   * Starts the tracker on 127.0.0.1, on `port` (default: an ephemeral one). `onPost` hears of
   * every POST as the tracker records it (`demo --api-only` prints its ledger so).
   */
  static async start(
    options: {
      readonly port?: number;
      readonly onPost?: (post: DemoPost) => void;
      /** Serve HTTPS with this key pair (a stand-in for a real API, `demo --api-only --tls HOST`). */
      readonly tls?: { readonly key: string; readonly cert: string };
    } = {},
  ): Promise<DemoApi> {
    const api = new DemoApi(options.onPost, options.tls);
    await new Promise<void>((resolve, reject) => {
      api.#server.once('error', reject);
      api.#server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
    });
    const addr = api.#server.address() as AddressInfo;
    api.#base = `${options.tls === undefined ? 'http' : 'https'}://127.0.0.1:${addr.port}`;
    return api;
  }

  /** `http://127.0.0.1:<port>` (`https://` with `tls`) */
  get url(): string {
    return this.#base;
  }

  /** The next POST creates its issue, then the socket is destroyed before a byte of the answer. */
  dropNextResponse(): void {
    this.#dropNext = true;
  }

  ledger(): DemoLedger {
    return { issues: [...this.#issues], posts: [...this.#posts] };
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #record(post: DemoPost): void {
    this.#posts.push(post);
    this.#onPost?.(post);
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '').split('?', 1)[0] ?? '';
    const route = ISSUES.exec(path);
    if (route === null) return send(res, 404, { message: 'Not Found' });
    const [, owner, repo] = route as unknown as [string, string, string];
    if (req.method === 'GET') {
      const prefix = `${this.#base}/${owner}/${repo}/issues/`;
      return send(
        res,
        200,
        this.#issues.filter((i) => i.html_url.startsWith(prefix)).map(({ idempotencyKey: _, ...i }) => i),
      );
    }
    if (req.method !== 'POST') return send(res, 405, { message: 'Method Not Allowed' });
    const body = await readBody(req);
    if (body === null) return send(res, 413, { message: 'Request body too large' });
    const header = req.headers['idempotency-key'];
    const key = typeof header === 'string' && header !== '' ? header : null;
    const stored = key === null ? undefined : this.#byKey.get(key);
    const refuse = (message: string): void => {
      this.#record({ idempotencyKey: key, result: 'refused', issue: null, dropped: false });
      send(res, 422, { message });
    };
    let issue: DemoIssue;
    if (stored !== undefined) {
      if (stored.body !== body) return refuse('Idempotency-Key reused with a different request body');
      issue = stored.issue;
    } else {
      const title = titleOf(body);
      if (title === null) return refuse('Validation Failed: title is required');
      const n = this.#issues.length + 1;
      issue = {
        id: 1000 + n,
        number: n,
        title,
        html_url: `${this.#base}/${owner}/${repo}/issues/${n}`,
        idempotencyKey: key,
      };
      this.#issues.push(issue);
      if (key !== null) this.#byKey.set(key, { body, issue });
    }
    const dropped = this.#dropNext;
    this.#dropNext = false;
    const result = stored === undefined ? 'created' : 'replayed';
    this.#record({ idempotencyKey: key, result, issue, dropped });
    // A dropped answer: the effect is in the ledger, the answer never leaves.
    if (dropped) {
      req.socket.destroy();
      return;
    }
    const { idempotencyKey: _, ...json } = issue;
    send(res, 201, json, result === 'replayed' ? { 'idempotent-replayed': 'true' } : {});
  }
}

function titleOf(body: string): string | null {
  try {
    const parsed = JSON.parse(body) as { title?: unknown };
    return typeof parsed.title === 'string' && parsed.title.trim() !== '' ? parsed.title : null;
  } catch {
    return null;
  }
}

/** The body as text, or `null` when it is larger than MAX_BODY_BYTES (the rest is not read). */
async function readBody(req: IncomingMessage): Promise<string | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return null;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function send(
  res: ServerResponse,
  status: number,
  json: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(json);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}
