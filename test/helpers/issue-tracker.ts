/**
 * A stateful loopback issue tracker for the unknown-outcome end-to-end suites: a real HTTP server
 * that keeps the issues it created, so a test can ask afterwards what the destination really did.
 *
 *   POST <collection>            creates an issue `{ number, title, html_url }` (201), unless the
 *                                next planned behaviour for that collection says otherwise
 *   GET  <collection>?state=all  lists the collection's issues (the reconciliation lookup)
 *
 * A collection is a request path without its query (`/repos/acme/api/issues`). Collections whose
 * path `honorsKeys()` accepts behave like an API that honors `Idempotency-Key`: a key seen before
 * with the same body replays the stored result with `Idempotent-Replayed: true` and creates
 * nothing; with another body it is refused (422). Other collections create on every POST.
 *
 * A JSON body's `title` names the issue; a form body's (`application/x-www-form-urlencoded`, as
 * Stripe's clients send) `title`, else its `description`. With `tls` it serves HTTPS.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type RecordedRequest, type SelfSignedCert, startUpstream, type Upstream } from './upstream.js';

/**
 * What the tracker does with the next POST to a collection:
 * - `ok`: commit (or replay) and answer 201;
 * - `commit-then-destroy`: commit (or replay), then cut the socket: the effect happened, no answer;
 * - `destroy-before-commit`: cut the socket without committing: nothing happened, no answer;
 * - `commit-then-hang`: commit, then never answer (the gate gives up, or is killed meanwhile);
 * - `commit-then-503`: commit, then answer 503 (a front that gave up on a backend that did the work);
 * - `slow-ok`: commit (or replay), then answer 201 after 800 ms;
 * - `reject-422`: answer 422 without committing (a definite failure by the tool's contract).
 */
export type PostBehaviour =
  | 'ok'
  | 'commit-then-destroy'
  | 'destroy-before-commit'
  | 'commit-then-hang'
  | 'commit-then-503'
  | 'slow-ok'
  | 'reject-422';

/** What the tracker does with the next GET (list) of a collection: list it, fail, or answer non-JSON. */
export type ListBehaviour = 'ok' | 'fail-503' | 'not-json';

export interface Issue {
  readonly number: number;
  readonly title: string;
  readonly html_url: string;
}

export interface IssueTracker {
  readonly url: string;
  readonly port: number;
  readonly upstream: Upstream;
  /** Queues behaviours for the next POSTs to `collection` (then `ok`). */
  plan(collection: string, ...behaviours: PostBehaviour[]): void;
  /** Queues behaviours for the next GETs (lists) of `collection` (then `ok`). */
  planList(collection: string, ...behaviours: ListBehaviour[]): void;
  /** An issue created by someone else (not through the gate). */
  seed(collection: string, title: string): Issue;
  /** The issues the collection holds (created, seeded). */
  issues(collection: string): Issue[];
  posts(collection: string): RecordedRequest[];
  gets(collection: string): RecordedRequest[];
  /** Resolves once `collection` received `n` POSTs (rejects after `timeoutMs`). */
  waitForPosts(collection: string, n: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

interface Stored {
  readonly body: string;
  readonly issue: Issue;
}

/** The issue's title in a POST body: JSON `title`, or a form's `title` or `description`. */
function titleOf(request: RecordedRequest): string {
  const text = request.body.toString();
  if (String(request.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded')) {
    const form = new URLSearchParams(text);
    return form.get('title') ?? form.get('description') ?? '';
  }
  return String((JSON.parse(text || '{}') as { title?: unknown }).title ?? '');
}

export async function startIssueTracker(
  options: { readonly honorsKeys?: (collection: string) => boolean; readonly tls?: SelfSignedCert } = {},
): Promise<IssueTracker> {
  const honors = options.honorsKeys ?? (() => false);
  const plans = new Map<string, PostBehaviour[]>();
  const listPlans = new Map<string, ListBehaviour[]>();
  const collections = new Map<string, Issue[]>();
  const byKey = new Map<string, Stored>();
  let numbers = 0;
  let base = '';

  const listOf = (collection: string): Issue[] => {
    let list = collections.get(collection);
    if (list === undefined) {
      list = [];
      collections.set(collection, list);
    }
    return list;
  };
  const create = (collection: string, title: string): Issue => {
    numbers += 1;
    const issue = { number: numbers, title, html_url: `${base}${collection}/${numbers}` };
    listOf(collection).push(issue);
    return issue;
  };
  const send = (res: ServerResponse, status: number, json: unknown, headers: Record<string, string> = {}) => {
    const body = JSON.stringify(json);
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      ...headers,
    });
    res.end(body);
  };

  const handler = (request: RecordedRequest, res: ServerResponse, req: IncomingMessage): void => {
    const collection = request.url.split('?')[0]!;
    if (request.method === 'GET') {
      const list = listPlans.get(collection)?.shift() ?? 'ok';
      if (list === 'fail-503') send(res, 503, { message: 'Service Unavailable' });
      else if (list === 'not-json') {
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end('<html>maintenance</html>');
      } else send(res, 200, listOf(collection));
      return;
    }
    if (request.method !== 'POST') {
      send(res, 405, { message: 'Method Not Allowed' });
      return;
    }
    const behaviour = plans.get(collection)?.shift() ?? 'ok';
    if (behaviour === 'reject-422') {
      send(res, 422, { message: 'Validation Failed' });
      return;
    }
    if (behaviour === 'destroy-before-commit') {
      req.socket.destroy();
      return;
    }
    const text = request.body.toString();
    const key = request.headers['idempotency-key'];
    let issue: Issue;
    let replayed = false;
    const stored = typeof key === 'string' && honors(collection) ? byKey.get(key) : undefined;
    if (stored !== undefined) {
      if (stored.body !== text) {
        send(res, 422, { message: 'Idempotency-Key reused with a different request body' });
        return;
      }
      issue = stored.issue;
      replayed = true;
    } else {
      issue = create(collection, titleOf(request));
      if (typeof key === 'string' && honors(collection)) byKey.set(key, { body: text, issue });
    }
    if (behaviour === 'commit-then-destroy') {
      req.socket.destroy();
      return;
    }
    if (behaviour === 'commit-then-hang') return;
    if (behaviour === 'commit-then-503') {
      send(res, 503, { message: 'Service Unavailable' });
      return;
    }
    const answer = (): void =>
      send(res, 201, issue, honors(collection) ? { 'idempotent-replayed': String(replayed) } : {});
    if (behaviour === 'slow-ok') setTimeout(answer, 800);
    else answer();
  };

  const upstream = await startUpstream(handler, options.tls === undefined ? {} : { tls: options.tls });
  base = `https://tracker.example.test:${upstream.port}`;
  const requestsTo = (collection: string, method: string): RecordedRequest[] =>
    upstream.requests.filter((r) => r.method === method && r.url.split('?')[0] === collection);

  return {
    url: upstream.url,
    port: upstream.port,
    upstream,
    plan(collection, ...behaviours) {
      plans.set(collection, [...(plans.get(collection) ?? []), ...behaviours]);
    },
    planList(collection, ...behaviours) {
      listPlans.set(collection, [...(listPlans.get(collection) ?? []), ...behaviours]);
    },
    seed: create,
    issues: (collection) => [...listOf(collection)],
    posts: (collection) => requestsTo(collection, 'POST'),
    gets: (collection) => requestsTo(collection, 'GET'),
    async waitForPosts(collection, n, timeoutMs = 10_000) {
      const until = Date.now() + timeoutMs;
      while (requestsTo(collection, 'POST').length < n) {
        if (Date.now() > until) {
          throw new Error(`${collection} got ${requestsTo(collection, 'POST').length} POST(s), not ${n}`);
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    close: () => upstream.close(),
  };
}
