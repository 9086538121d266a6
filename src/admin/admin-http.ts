/**
 * HTTP plumbing of the admin server: JSON and RFC 9457 problem responses (never cached), and a
 * bounded JSON body reader. Nothing here sees the admin token.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type ErrorCode, errorAnswer } from '../errors.js';

/** Largest request body the admin API reads (approval decisions are a few hundred bytes). */
export const MAX_ADMIN_BODY_BYTES = 64 * 1024;

/** A refusal the API answers with `application/problem+json`. */
export class HttpProblem extends Error {
  readonly status: number;
  /** Slug for `urn:effectgate:problem:<slug>`. */
  readonly problem: string;
  readonly title: string;
  readonly code: ErrorCode | undefined;
  readonly headers: Readonly<Record<string, string>>;

  constructor(init: {
    readonly status: number;
    readonly problem: string;
    readonly title: string;
    readonly detail: string;
    readonly code?: ErrorCode;
    readonly headers?: Readonly<Record<string, string>>;
  }) {
    super(init.detail);
    this.name = 'HttpProblem';
    this.status = init.status;
    this.problem = init.problem;
    this.title = init.title;
    this.code = init.code;
    this.headers = init.headers ?? {};
  }
}

/**
 * The problem answering error `code`, its status and slug from the catalogue (`ERROR_CODES`), as
 * the gate's own answers take them.
 */
export function codedProblem(
  code: ErrorCode,
  title: string,
  detail: string,
  headers?: Readonly<Record<string, string>>,
): HttpProblem {
  const { status, type } = errorAnswer(code);
  return new HttpProblem({
    status,
    problem: type,
    title,
    detail,
    code,
    ...(headers === undefined ? {} : { headers }),
  });
}

export function badRequest(detail: string): HttpProblem {
  return new HttpProblem({ status: 400, problem: 'bad_request', title: 'Bad request', detail });
}

/** A 404; with `EG_ERR_NOT_FOUND` when a named record is missing, without for an unknown route. */
export function notFound(detail: string, code?: 'EG_ERR_NOT_FOUND'): HttpProblem {
  if (code !== undefined) return codedProblem(code, 'Not found', detail);
  return new HttpProblem({ status: 404, problem: 'not_found', title: 'Not found', detail });
}

export function methodNotAllowed(method: string | undefined, allow: readonly string[]): HttpProblem {
  return new HttpProblem({
    status: 405,
    problem: 'method_not_allowed',
    title: 'Method not allowed',
    detail: `${method ?? 'This method'} is not allowed here; use ${allow.join(' or ')}.`,
    headers: { allow: allow.join(', ') },
  });
}

const SECURITY_HEADERS = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
} as const;

export function sendJson(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Readonly<Record<string, string>> = {},
): void {
  send(req, res, status, 'application/json', JSON.stringify(body), headers);
}

export function sendProblem(req: IncomingMessage, res: ServerResponse, problem: HttpProblem): void {
  const body = {
    type: `urn:effectgate:problem:${problem.problem}`,
    title: problem.title,
    status: problem.status,
    detail: problem.message,
    ...(problem.code === undefined ? {} : { code: problem.code }),
  };
  send(req, res, problem.status, 'application/problem+json', JSON.stringify(body), problem.headers);
}

function send(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  contentType: string,
  text: string,
  headers: Readonly<Record<string, string>>,
): void {
  if (res.headersSent || res.destroyed) return;
  const body = Buffer.from(text, 'utf8');
  res.writeHead(status, {
    ...SECURITY_HEADERS,
    ...headers,
    'content-type': contentType,
    'content-length': String(body.byteLength),
  });
  res.end(req.method === 'HEAD' ? undefined : body);
}

/**
 * Reads the request body as one JSON object. Over `MAX_ADMIN_BODY_BYTES` → 413 (the connection is
 * closed rather than drained); not JSON, or JSON that is not an object → 400. The content type is
 * not checked: the body must parse, whatever the client called it.
 */
export function readJsonObject(req: IncomingMessage): Promise<Record<string, unknown>> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > MAX_ADMIN_BODY_BYTES) return Promise.reject(tooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.byteLength;
      if (size > MAX_ADMIN_BODY_BYTES) {
        // Stop collecting; the rest is discarded while the 413 goes out with `connection: close`.
        stop();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      stop();
      try {
        resolve(parseJsonObject(Buffer.concat(chunks)));
      } catch (err) {
        reject(err);
      }
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.once('error', () => {
      stop();
      reject(badRequest('The request body could not be read.'));
    });
  });
}

function parseJsonObject(bytes: Buffer): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch {
    throw badRequest(
      'The body must be a JSON object, e.g. {"by": "alice@example.com", "reason": "checked upstream"}.',
    );
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw badRequest('The body must be a JSON object, not an array, a string, a number or null.');
  }
  return parsed as Record<string, unknown>;
}

function tooLarge(): HttpProblem {
  return new HttpProblem({
    status: 413,
    problem: 'body_too_large',
    title: 'Request body too large',
    detail: `The admin API reads at most ${MAX_ADMIN_BODY_BYTES} bytes of body.`,
    headers: { connection: 'close' },
  });
}
