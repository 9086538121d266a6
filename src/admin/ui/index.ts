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
  APPROVAL_ACTIONS,
  InputError,
  isApprovalAction,
  parseApprovalDecision,
  parseName,
} from '../admin-input.js';
import { AdminRouter } from '../admin-router.js';
import { parseResolution } from '../observation-input.js';
import { parseRunRelease } from '../run-input.js';
import { serveApprovalsPage } from './approvals-page.js';
import { withConfirmation, withoutConfirmation } from './confirmation.js';
import { renderErrorPage, renderLoginPage } from './login-page.js';
import { serveOperationPage } from './operation-page.js';
import { operationHref, serveOperationsPage } from './operations-page.js';
import { runHref, serveRunPage, serveRunsPage } from './runs-page.js';
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
import type { UiContext } from './ui-context.js';
import { overTls, readForm, redirect, safeUiPath, sendHtml, UiError } from './ui-http.js';

export { escapeHtml, html, SafeHtml } from './html.js';
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

/**
 * A request for a page behind the session: what every page handler gets. `form()` reads the
 * posted form after checking it comes from this site and carries this session's CSRF token.
 */
interface PageRequest {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly ctx: UiContext;
  readonly query: URLSearchParams;
  readonly params: Readonly<Record<string, string>>;
  readonly state: RequestState;
  readonly csrf: string;
  /** This page's own path and query, where its forms come back to. */
  readonly self: string;
  readonly identity: string;
  form(): Promise<Map<string, string>>;
}

type PageHandler = (p: PageRequest) => Promise<void>;

/** The pages served without a session (paths after `/ui`; admin-router.ts matches them). */
const PUBLIC = new AdminRouter<
  (req: IncomingMessage, res: ServerResponse, ctx: UiContext, query: URLSearchParams) => Promise<void>
>([
  { method: 'GET', path: '/login', handler: async (req, res, ctx, query) => loginPage(req, res, ctx, query) },
  { method: 'POST', path: '/login', handler: async (req, res, ctx) => login(req, res, ctx) },
]);

const operationsList: PageHandler = (p) => serveOperationsPage(p.req, p.res, p.ctx, p.query, p.csrf);

/** The pages behind the session (paths after `/ui`). */
const PAGES = new AdminRouter<PageHandler>([
  { method: 'GET', path: '/', handler: operationsList },
  { method: 'GET', path: '/operations', handler: operationsList },
  { method: 'GET', path: '/operations/', handler: operationsList },
  {
    method: 'GET',
    path: '/operations/:id',
    handler: (p) => {
      p.state.back = '/ui/operations';
      return serveOperationPage(p.req, p.res, p.ctx, p.params['id']!, p.query, p.csrf);
    },
  },
  { method: 'POST', path: '/operations/:id/resolve', handler: resolveOperation },
  {
    method: 'GET',
    path: '/approvals',
    handler: (p) => serveApprovalsPage(p.req, p.res, p.ctx, p.query, p.csrf, p.self),
  },
  { method: 'POST', path: `/approvals/:id/:action(${APPROVAL_ACTIONS.join('|')})`, handler: decideApproval },
  { method: 'GET', path: '/runs', handler: (p) => serveRunsPage(p.req, p.res, p.ctx, p.query, p.csrf) },
  {
    method: 'GET',
    path: '/runs/:id',
    handler: (p) => {
      p.state.back = '/ui/runs';
      return serveRunPage(p.req, p.res, p.ctx, p.params['id']!, p.query, p.csrf);
    },
  },
  { method: 'POST', path: '/runs/:id/release', handler: releaseRun },
  { method: 'POST', path: '/logout', handler: logout },
]);

function methodNotAllowed(allow: readonly string[]): UiError {
  const list = allow.join(', ');
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
  if (raw.length === 0) {
    if (req.method !== 'GET' && req.method !== 'HEAD') throw methodNotAllowed(['GET', 'HEAD']);
    return redirect(res, '/ui/');
  }
  const open = PUBLIC.match(req.method, raw);
  if (open.kind === 'found') return open.handler(req, res, ctx, query);
  if (open.kind === 'wrong_method') throw methodNotAllowed(open.allow);

  const identity = authenticate(req, ctx.token);
  if (identity === null) {
    // Nothing about the pages is told without a session, not even whether a path exists.
    const original = req.method === 'GET' || req.method === 'HEAD' ? safeUiPath(req.url) : null;
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
  const hit = PAGES.match(req.method, raw.map(decodeSegment));
  if (hit.kind === 'not_found') throw new UiError(404, 'Not found', 'No such admin page.');
  if (hit.kind === 'wrong_method') throw methodNotAllowed(hit.allow);
  return hit.handler({
    req,
    res,
    ctx,
    query,
    params: hit.params,
    state,
    csrf,
    self: withoutConfirmation(safeUiPath(req.url) ?? '/ui/'),
    identity,
    form: () => checkedForm(req, token, identity),
  });
}

async function logout(p: PageRequest): Promise<void> {
  await p.form();
  if (p.identity !== 'bearer') endSession(p.identity);
  redirect(p.res, '/ui/login', { 'set-cookie': sessionCookie(null, overTls(p.req)) });
}

async function releaseRun(p: PageRequest): Promise<void> {
  const id = parseName('run id', p.params['id']!);
  p.state.back = runHref(id);
  const form = await p.form();
  const run = await p.ctx.store.releaseRun(
    parseRunRelease(id, {
      by: form.get('by'),
      reason: form.get('reason'),
      tenant: form.get('tenant'),
      area: form.get('area'),
      agent: form.get('agent'),
    }),
  );
  const release = run.releases.at(-1)?.id ?? '';
  redirect(p.res, `${runHref(id)}?released=${encodeURIComponent(release)}#confirmation`);
}

async function resolveOperation(p: PageRequest): Promise<void> {
  const id = parseName('operation id', p.params['id']!);
  const self = operationHref(id);
  p.state.back = self;
  const form = await p.form();
  // One reference per line (or separated by blanks): duplicate_effect_confirmed names each effect.
  const refs = (form.get('ref') ?? '').split(/\s+/).filter((r) => r !== '');
  const input = parseResolution(
    id,
    { as: form.get('as'), by: form.get('by'), reason: form.get('reason'), ref: refs },
    'page',
  );
  const result = await p.ctx.store.addObservation(input);
  // The page it lands on confirms what was recorded (confirmation.ts), next to its timeline row.
  const landing = `${self}#observation-${encodeURIComponent(result.observationId)}`;
  redirect(p.res, withConfirmation(landing, 'resolved', result.observationId));
}

async function decideApproval(p: PageRequest): Promise<void> {
  const action = p.params['action']!;
  // The route admits only these (APPROVAL_ACTIONS); the check narrows the type.
  if (!isApprovalAction(action)) throw new UiError(404, 'Not found', 'No such admin page.');
  p.state.back = '/ui/approvals';
  const form = await p.form();
  const posted = safeUiPath(form.get('back'));
  const back = posted === null ? null : withoutConfirmation(posted);
  if (back !== null) p.state.back = back;
  const id = parseName('approval id', p.params['id']!);
  const ttl = form.get('ttl')?.trim();
  const decision = parseApprovalDecision(id, action, {
    by: form.get('by'),
    reason: form.get('reason'),
    ...(action === 'approve' && ttl !== undefined && ttl !== '' ? { ttl } : {}),
  });
  const decided = await p.ctx.store.decideApproval(decision);
  redirect(p.res, withConfirmation(back ?? '/ui/approvals', 'decided', decided.id));
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
