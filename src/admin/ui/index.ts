/**
 * The admin web pages under `/ui`, served by the admin server: the operations list, the timeline of
 * one operation and the approval cards, as plain server-rendered HTML (no script, no external
 * asset, readable without JavaScript). The admin token protects them: `POST /ui/login` trades it
 * for a session cookie (an HMAC, never the token), or a request may carry
 * `Authorization: Bearer <token>`. Every form carries a CSRF token.
 *
 *   GET  /ui/login, POST /ui/login, POST /ui/logout
 *   GET  /ui/ (= /ui/operations)?state=&tool=&key=&tenant=&since=&limit=
 *   GET  /ui/operations/:id?decided=<approval id>|resolved=<observation id>
 *   POST /ui/operations/:id/resolve                (form: csrf, as, by, reason, ref)
 *   GET  /ui/approvals?state=&limit=&decided=<approval id>
 *   POST /ui/approvals/:id/approve|deny|revoke     (form: csrf, by, reason, [ttl], back)
 *   GET  /ui/runs?halted=true, GET /ui/runs/:id?released=<release id>
 *   POST /ui/runs/:id/release                      (form: csrf, by, reason, tenant, area, agent)
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { problemOf } from '../admin-api.js';
import { checkAdminAuth, sameSecret } from '../admin-auth.js';
import {
  DEFAULT_LIST_LIMIT,
  InputError,
  isApprovalAction,
  parseApprovalDecision,
  parseName,
} from '../admin-input.js';
import { parseResolution } from '../observation-input.js';
import { parseRunRelease } from '../run-input.js';
import { serveApprovalsPage } from './approvals-page.js';
import { withConfirmation } from './confirmation.js';
import { renderErrorPage, renderLoginPage } from './login-page.js';
import { serveOperationPage } from './operation-page.js';
import { operationHref, serveOperationsPage } from './operations-page.js';
import { renderRunPage, renderRunsPage, runHref } from './runs-page.js';
import {
  cookieValue,
  csrfToken,
  endSession,
  newSession,
  SESSION_COOKIE,
  sessionCookie,
  verifyCsrf,
  verifySession,
} from './session.js';
import { param, requestedCount, type UiContext } from './ui-context.js';
import { overTls, readForm, redirect, safeUiPath, sendHtml, UiError } from './ui-http.js';

export { escapeHtml, Html, html } from './html.js';
export { parseKeyQuery } from './operations-page.js';
export { SESSION_COOKIE } from './session.js';
export type { UiContext } from './ui-context.js';

/** What the error page of a failed request can offer: a way back, and the logout form. */
interface RequestState {
  csrf: string | null;
  back: string | null;
}

/**
 * Serves one request when its path is `/ui` or under `/ui/`; returns `false` for any other path
 * (the admin server then routes it). Never throws: failures become an HTML error page.
 */
export async function handleUi(req: IncomingMessage, res: ServerResponse, ctx: UiContext): Promise<boolean> {
  const target = req.url ?? '';
  const q = target.indexOf('?');
  const path = q === -1 ? target : target.slice(0, q);
  if (path !== '/ui' && !path.startsWith('/ui/')) return false;
  const query = new URLSearchParams(q === -1 ? '' : target.slice(q + 1));
  const state: RequestState = { csrf: null, back: null };
  try {
    await route(req, res, ctx, path, query, state);
  } catch (err) {
    sendError(req, res, ctx, err, state);
  }
  return true;
}

function sendError(
  req: IncomingMessage,
  res: ServerResponse,
  ctx: UiContext,
  err: unknown,
  state: RequestState,
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  let status: number;
  let title: string;
  let message: string;
  let headers: Readonly<Record<string, string>> = {};
  if (err instanceof UiError) {
    ({ status, title, message, headers } = err);
  } else if (err instanceof InputError) {
    status = 400;
    title = 'Bad request';
    message = err.message;
  } else {
    const problem = problemOf(err);
    status = problem.status;
    title = problem.title;
    message = problem.message;
    headers = problem.headers;
    if (status === 500)
      ctx.logger?.error({ error: err instanceof Error ? err.message : String(err) }, 'admin page failed');
  }
  sendHtml(req, res, status, renderErrorPage(title, message, state.back, state.csrf), headers);
}

function decodeSegment(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new UiError(400, 'Bad request', 'The path holds malformed percent-encoding.');
  }
}

/** The identity the CSRF token is bound to: the session cookie value, or "bearer". */
function authenticate(req: IncomingMessage, token: string | null): string | null {
  if (token === null || token === '') return null;
  if (checkAdminAuth(req.headers.authorization, token) === 'ok') return 'bearer';
  const cookie = cookieValue(req.headers.cookie, SESSION_COOKIE);
  return cookie !== undefined && verifySession(cookie, token) ? cookie : null;
}

function methodNotAllowed(allow: 'GET' | 'POST'): UiError {
  const list = allow === 'GET' ? 'GET, HEAD' : 'POST';
  return new UiError(405, 'Method not allowed', `Use ${list} here.`, { allow: list });
}

/**
 * A browser says when a request comes from another site (`Sec-Fetch-Site`); no form here is ever
 * posted cross-site. (The CSRF token is the real check; this one also covers the login form.)
 */
function refuseCrossSite(req: IncomingMessage): void {
  if (req.headers['sec-fetch-site'] === 'cross-site')
    throw new UiError(403, 'Forbidden', 'This form was sent from another site.');
}

async function route(
  req: IncomingMessage,
  res: ServerResponse,
  ctx: UiContext,
  path: string,
  query: URLSearchParams,
  state: RequestState,
): Promise<void> {
  const raw = path.split('/').slice(2);
  const method = req.method === 'HEAD' ? 'GET' : req.method;
  if (raw.length === 0) {
    if (method !== 'GET') throw methodNotAllowed('GET');
    return redirect(res, '/ui/');
  }
  if (raw.length === 1 && raw[0] === 'login') {
    if (method === 'GET') return loginPage(req, res, ctx, query);
    if (method === 'POST') return login(req, res, ctx);
    throw methodNotAllowed('GET');
  }

  const identity = authenticate(req, ctx.token);
  if (identity === null) {
    // Nothing about the pages is told without a session, not even whether a path exists.
    const original = method === 'GET' ? safeUiPath(req.url) : null;
    return redirect(
      res,
      original === null || original === '/ui/'
        ? '/ui/login'
        : `/ui/login?next=${encodeURIComponent(original)}`,
    );
  }
  const token = ctx.token!;
  const csrf = csrfToken(token, identity);
  state.csrf = csrf;
  state.back = '/ui/';
  const self = safeUiPath(req.url) ?? '/ui/';
  const segments = raw.map(decodeSegment);

  const [first, second, third] = segments;
  if (
    (segments.length === 1 && (first === '' || first === 'operations')) ||
    (segments.length === 2 && first === 'operations' && second === '')
  ) {
    if (method !== 'GET') throw methodNotAllowed('GET');
    return serveOperationsPage(req, res, ctx, query, csrf);
  }
  if (segments.length === 2 && first === 'operations') {
    if (method !== 'GET') throw methodNotAllowed('GET');
    state.back = '/ui/operations';
    return serveOperationPage(req, res, ctx, second!, query, csrf);
  }
  if (segments.length === 1 && first === 'approvals') {
    if (method !== 'GET') throw methodNotAllowed('GET');
    return serveApprovalsPage(req, res, ctx, query, csrf, self);
  }
  if (segments.length === 1 && first === 'runs') {
    if (method !== 'GET') throw methodNotAllowed('GET');
    return runsPage(req, res, ctx, query, csrf);
  }
  if (segments.length === 2 && first === 'runs') {
    if (method !== 'GET') throw methodNotAllowed('GET');
    state.back = '/ui/runs';
    return runPage(req, res, ctx, second!, query, csrf);
  }
  if (segments.length === 3 && first === 'runs' && third === 'release') {
    if (method !== 'POST') throw methodNotAllowed('POST');
    const id = parseName('run id', second!);
    state.back = runHref(id);
    const form = await checkedForm(req, token, identity);
    const run = await ctx.store.releaseRun(
      parseRunRelease(id, {
        by: form.get('by'),
        reason: form.get('reason'),
        tenant: form.get('tenant'),
        area: form.get('area'),
        agent: form.get('agent'),
      }),
    );
    const release = run.releases.at(-1)?.id ?? '';
    return redirect(res, `${runHref(id)}?released=${encodeURIComponent(release)}#confirmation`);
  }
  if (segments.length === 1 && first === 'logout') {
    if (method !== 'POST') throw methodNotAllowed('POST');
    await checkedForm(req, token, identity);
    if (identity !== 'bearer') endSession(identity);
    return redirect(res, '/ui/login', { 'set-cookie': sessionCookie(null, overTls(req)) });
  }
  if (segments.length === 3 && first === 'operations' && third === 'resolve') {
    if (method !== 'POST') throw methodNotAllowed('POST');
    const id = parseName('operation id', second!);
    const self = operationHref(id);
    state.back = self;
    const form = await checkedForm(req, token, identity);
    // One reference per line (or separated by blanks): duplicate_effect_confirmed names each effect.
    const refs = (form.get('ref') ?? '').split(/\s+/).filter((r) => r !== '');
    const input = parseResolution(
      id,
      { as: form.get('as'), by: form.get('by'), reason: form.get('reason'), ref: refs },
      'page',
    );
    const result = await ctx.store.addObservation(input);
    // The page it lands on confirms what was recorded (confirmation.ts), next to its timeline row.
    const landing = `${self}#observation-${encodeURIComponent(result.observationId)}`;
    return redirect(res, withConfirmation(landing, 'resolved', result.observationId));
  }
  if (segments.length === 3 && first === 'approvals' && isApprovalAction(third!)) {
    if (method !== 'POST') throw methodNotAllowed('POST');
    state.back = '/ui/approvals';
    const form = await checkedForm(req, token, identity);
    const back = safeUiPath(form.get('back'));
    if (back !== null) state.back = back;
    const id = parseName('approval id', second!);
    const ttl = form.get('ttl')?.trim();
    const decision = parseApprovalDecision(id, third, {
      by: form.get('by'),
      reason: form.get('reason'),
      ...(third === 'approve' && ttl !== undefined && ttl !== '' ? { ttl } : {}),
    });
    const decided = await ctx.store.decideApproval(decision);
    return redirect(res, withConfirmation(back ?? '/ui/approvals', 'decided', decided.id));
  }
  throw new UiError(404, 'Not found', 'No such admin page.');
}

/** The posted form, after checking it comes from this site and carries this session's CSRF token. */
async function checkedForm(
  req: IncomingMessage,
  token: string,
  identity: string,
): Promise<Map<string, string>> {
  refuseCrossSite(req);
  const form = await readForm(req);
  if (!verifyCsrf(form.get('csrf'), token, identity)) {
    throw new UiError(
      403,
      'Forbidden',
      'The form is missing its CSRF token, or the token does not belong to this session. Reload the page and try again.',
    );
  }
  return form;
}

function loginPage(req: IncomingMessage, res: ServerResponse, ctx: UiContext, query: URLSearchParams): void {
  const next = safeUiPath(query.get('next'));
  if (ctx.token !== null && authenticate(req, ctx.token) !== null) redirect(res, next ?? '/ui/');
  else sendHtml(req, res, 200, renderLoginPage({ unconfigured: ctx.token === null, error: null, next }));
}

async function login(req: IncomingMessage, res: ServerResponse, ctx: UiContext): Promise<void> {
  refuseCrossSite(req);
  const form = await readForm(req);
  const next = safeUiPath(form.get('next'));
  if (ctx.token === null || ctx.token === '') {
    return sendHtml(req, res, 401, renderLoginPage({ unconfigured: true, error: null, next }));
  }
  const given = (form.get('token') ?? '').trim();
  if (given === '' || !sameSecret(given, ctx.token)) {
    return sendHtml(
      req,
      res,
      401,
      renderLoginPage({ unconfigured: false, error: 'That is not the admin token.', next }),
    );
  }
  const target = next === null || next.startsWith('/ui/login') ? '/ui/' : next;
  redirect(res, target, { 'set-cookie': sessionCookie(newSession(ctx.token), overTls(req)) });
}

async function runsPage(
  req: IncomingMessage,
  res: ServerResponse,
  ctx: UiContext,
  query: URLSearchParams,
  csrf: string,
): Promise<void> {
  const halted = param(query, 'halted') === 'true';
  const [runs, requested] = await Promise.all([
    ctx.store.listRuns({ ...(halted ? { halted: true } : {}), limit: DEFAULT_LIST_LIMIT }),
    requestedCount(ctx.store),
  ]);
  sendHtml(req, res, 200, renderRunsPage({ runs, halted, limit: DEFAULT_LIST_LIMIT, csrf, requested }));
}

async function runPage(
  req: IncomingMessage,
  res: ServerResponse,
  ctx: UiContext,
  rawId: string,
  query: URLSearchParams,
  csrf: string,
): Promise<void> {
  let id: string;
  try {
    id = parseName('run id', rawId);
  } catch {
    throw new UiError(404, 'Not found', 'No such run.');
  }
  const [runs, decisions, requested] = await Promise.all([
    ctx.store.listRuns({ runId: id }),
    ctx.store.listDecisions({ runId: id }),
    requestedCount(ctx.store),
  ]);
  if (runs.length === 0 && decisions.length === 0) {
    throw new UiError(404, 'Not found', `No run ${JSON.stringify(id)}.`);
  }
  // A confirmation only for a release this run really has (a crafted link shows none).
  const asked = param(query, 'released');
  const released = runs.some((r) => r.releases.some((x) => x.id === asked)) ? asked! : null;
  sendHtml(req, res, 200, renderRunPage({ id, runs, decisions, csrf, requested, released }));
}
