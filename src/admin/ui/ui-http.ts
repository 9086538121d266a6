/**
 * HTTP plumbing of the admin pages: HTML responses with a strict Content-Security-Policy (no
 * script, no external anything), redirects that never leave `/ui`, and a bounded reader of
 * url-encoded forms.
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { parseName } from '../admin-input.js';
import type { SafeHtml } from './html.js';

/** Largest form body the pages read (an approval decision is a few hundred bytes). */
export const MAX_FORM_BYTES = 16 * 1024;

export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
  'x-frame-options': 'DENY',
};

/** A refusal shown as a page: status, a title and a message for a person. */
export class UiError extends Error {
  readonly status: number;
  readonly title: string;
  readonly headers: Readonly<Record<string, string>>;
  constructor(
    status: number,
    title: string,
    message: string,
    headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.name = 'UiError';
    this.status = status;
    this.title = title;
    this.headers = headers;
  }
}

export function sendHtml(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  page: SafeHtml,
  headers: Readonly<Record<string, string | string[]>> = {},
): void {
  if (res.headersSent || res.destroyed) return;
  const body = Buffer.from(page.text, 'utf8');
  res.writeHead(status, {
    ...PAGE_HEADERS,
    ...headers,
    'content-type': 'text/html; charset=utf-8',
    'content-length': String(body.byteLength),
  });
  res.end(req.method === 'HEAD' ? undefined : body);
}

/** 303 See Other to a `/ui` path (callers pass only paths checked by `safeUiPath` or literals). */
export function redirect(
  res: ServerResponse,
  location: string,
  headers: Readonly<Record<string, string | string[]>> = {},
): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(303, { ...PAGE_HEADERS, ...headers, location, 'content-length': '0' });
  res.end();
}

/** Whether the request reached us over TLS (the admin server is plain HTTP today). */
export function overTls(req: IncomingMessage): boolean {
  return (req.socket as Partial<TLSSocket>).encrypted === true;
}

/**
 * A same-origin path under `/ui` to return to, or `null`: printable ASCII only, no `..` segment, no
 * backslash, never protocol-relative. Anything else could redirect off the admin server.
 */
export function safeUiPath(value: string | undefined | null): string | null {
  if (value === undefined || value === null || value.length > 2000) return null;
  if (!/^\/ui(?:[/?][\x21-\x7e]*)?$/.test(value)) return null;
  const path = value.split('?', 1)[0]!;
  // A dot segment (plain or percent-encoded) or a backslash could step out of /ui once resolved.
  if (/[\\]|\/\/|(^|\/)\.{1,2}(\/|$)|%2e|%5c/i.test(path)) return null;
  return value;
}

/**
 * Reads an `application/x-www-form-urlencoded` body (at most `MAX_FORM_BYTES`), every field at
 * most once.
 */
export async function readForm(req: IncomingMessage): Promise<Map<string, string>> {
  const type = (req.headers['content-type'] ?? '').split(';', 1)[0]!.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') {
    req.resume();
    throw new UiError(415, 'Unsupported form', 'The form must be sent as application/x-www-form-urlencoded.');
  }
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > MAX_FORM_BYTES) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.byteLength;
    if (size > MAX_FORM_BYTES) throw tooLarge();
    chunks.push(chunk);
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks));
  } catch {
    throw new UiError(400, 'Bad form', 'The form is not valid UTF-8.');
  }
  const fields = new Map<string, string>();
  for (const [name, value] of new URLSearchParams(text)) {
    if (fields.has(name))
      throw new UiError(400, 'Bad form', `The form field "${name}" is given more than once.`);
    fields.set(name, value);
  }
  return fields;
}

function tooLarge(): UiError {
  return new UiError(413, 'Form too large', `The admin pages read at most ${MAX_FORM_BYTES} bytes of form.`, {
    connection: 'close',
  });
}

/**
 * The id a page's path names, or 404 for one that could never be an id (a NUL, too long): the
 * page says "no such" rather than explaining the id rules to whoever typed the path.
 */
export function pageId(what: 'operation' | 'run', raw: string): string {
  try {
    return parseName(`${what} id`, raw);
  } catch {
    throw new UiError(404, 'Not found', `No such ${what}.`);
  }
}
