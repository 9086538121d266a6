/**
 * Approval cards (docs/design.md §3 "Approvals"): the intent, the previous dispatch state and the
 * planned recovery, who asked and who decided; with Approve / Deny forms on a `requested` card and
 * a Revoke form on an approved one not used yet. `GET /ui/approvals?state=` lists them.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ApprovalRecord, ApprovalState } from '../../store/index.js';
import {
  APPROVAL_STATES,
  DEFAULT_LIST_LIMIT,
  InputError,
  MAX_BY_CHARS,
  MAX_REASON_CHARS,
  parseApprovalState,
  parseLimit,
  parseName,
} from '../admin-input.js';
import { approvalConfirmation } from './confirmation.js';
import { html, keyText, type SafeHtml } from './html.js';
import { page } from './layout.js';
import { displayTime, operationHref } from './operations-page.js';
import { param, requestedCount, type UiContext } from './ui-context.js';
import { sendHtml } from './ui-http.js';

export interface CardOptions {
  readonly csrf: string;
  /** Where the forms come back to after the decision. */
  readonly back: string;
  /** Show a link to the operation (on the approvals list; the operation page is the operation). */
  readonly showOperation: boolean;
}

function approvalAction(id: string, action: 'approve' | 'deny' | 'revoke'): string {
  return `/ui/approvals/${encodeURIComponent(id)}/${action}`;
}

/** The request the card lets go (its fingerprint), and whether it changed from the lost attempt's. */
function requestFacts(a: ApprovalRecord): SafeHtml {
  const lost = a.intent.fingerprint;
  const r = a.intent.requestFingerprint;
  if (r === null)
    return html`<span class="muted">not recorded (a card from before migration 0011): it lets no request go</span> · lost attempt <code>${lost}</code>`;
  if (r === lost)
    return html`the same request as the attempt whose outcome is unknown: <code>${r}</code> <span class="muted">(approving lets only it go)</span>`;
  return html`<b>CHANGED</b>: <code>${r}</code>; the attempt whose outcome is unknown was <code>${lost}</code> <span class="muted">(same key values, another request; approving lets only it go, as a new operation)</span>`;
}

export function renderApprovalCard(a: ApprovalRecord, options: CardOptions): SafeHtml {
  const i = a.intent;
  const previous = [
    a.previousDispatchState ?? 'no attempt yet',
    ...(a.previousStatus === null ? [] : [`status ${a.previousStatus}`]),
  ].join(', ');
  const hidden = html`<input type="hidden" name="csrf" value="${options.csrf}"><input type="hidden" name="back" value="${options.back}">`;
  let form: SafeHtml | string = '';
  if (a.state === 'requested') {
    form = html`<form class="decide" method="post" action="${approvalAction(a.id, 'approve')}" aria-label="Decide approval ${a.id}">
  ${hidden}
  <label>By <input name="by" required maxlength="${MAX_BY_CHARS}" placeholder="you@example.com" autocomplete="username"></label>
  <label>Reason <input name="reason" required maxlength="${MAX_REASON_CHARS}" placeholder="why this retry is safe (or not)"></label>
  <label class="wide">Approved retry may start within <input name="ttl" placeholder="1h (default), 30m, permanent" size="28"></label>
  <div class="buttons">
    <button type="submit" class="approve">Approve</button>
    <button type="submit" class="deny" formaction="${approvalAction(a.id, 'deny')}">Deny</button>
    <span class="muted">Approving allows exactly one more attempt.</span>
  </div>
</form>`;
  } else if (a.state === 'approved' && a.usedAt === null) {
    form = html`<form class="decide" method="post" action="${approvalAction(a.id, 'revoke')}" aria-label="Revoke approval ${a.id}">
  ${hidden}
  <label>By <input name="by" required maxlength="${MAX_BY_CHARS}" placeholder="you@example.com" autocomplete="username"></label>
  <label>Reason <input name="reason" required maxlength="${MAX_REASON_CHARS}" placeholder="why the retry may no longer start"></label>
  <div class="buttons"><button type="submit" class="revoke">Revoke</button><span class="muted">The approved retry has not started yet.</span></div>
</form>`;
  }
  const decided =
    a.decidedAt === null
      ? html`<span class="muted">not yet</span>`
      : html`${a.decidedBy ?? '?'} at <time datetime="${a.decidedAt}">${displayTime(a.decidedAt)}</time>${a.reason ? html`: ${a.reason}` : ''}`;
  const expires =
    a.expiresAt !== null
      ? html`<time datetime="${a.expiresAt}">${displayTime(a.expiresAt)}</time>`
      : a.decidedAt !== null && a.state !== 'denied' && a.state !== 'withdrawn'
        ? 'never'
        : '-';
  return html`<article class="card k-${a.state}" id="approval-${a.id}" data-approval-id="${a.id}" data-state="${a.state}">
<header><span><b>Approval</b> <code>${a.id}</code></span><span class="badge a-${a.state}">${a.state}</span></header>
<dl class="facts">
  ${options.showOperation ? html`<dt>operation</dt><dd><a class="mono" href="${operationHref(a.operationId)}">${a.operationId}</a></dd>` : ''}
  <dt>intent</dt><dd class="wrap">${i.toolId} · ${i.scope.tenant} / ${i.scope.area} / ${i.scope.agent}<br><code>${i.method} ${i.host} ${i.path}</code></dd>
  <dt>key values</dt><dd class="wrap"><code>${keyText(i.keyValues)}</code></dd>
  <dt>idempotency</dt><dd class="wrap">${i.idempotencyHeader === null ? html`<span class="muted">none: the destination cannot deduplicate the retry</span>` : html`<code>${i.idempotencyHeader}: ${i.idempotencyKey ?? a.operationId}</code>`}</dd>
  <dt>request</dt><dd class="wrap">${requestFacts(a)}</dd>
  <dt>previous dispatch</dt><dd>${previous}${a.previousAttemptId === null ? '' : html` <span class="muted">(attempt <code>${a.previousAttemptId}</code>)</span>`}</dd>
  <dt>planned recovery</dt><dd class="wrap">${a.plannedRecovery}</dd>
  <dt>requested</dt><dd class="wrap"><time datetime="${a.requestedAt}">${displayTime(a.requestedAt)}</time> by ${a.requestedBy}</dd>
  <dt>decided</dt><dd class="wrap decided">${decided}</dd>
  <dt>expires</dt><dd>${expires}</dd>
  ${a.revokedAt === null ? '' : html`<dt>revoked</dt><dd class="wrap">${a.revokedBy ?? '?'} at <time datetime="${a.revokedAt}">${displayTime(a.revokedAt)}</time></dd>`}
  ${a.grantId === null ? '' : html`<dt>grant</dt><dd class="wrap"><code>${a.grantId}</code> <span class="muted">(a session grant of the run: no card per call)</span></dd>`}
  ${a.usedAt === null ? '' : html`<dt>used</dt><dd class="wrap">by attempt <code>${a.usedByAttemptId ?? '?'}</code> at <time datetime="${a.usedAt}">${displayTime(a.usedAt)}</time></dd>`}
</dl>
${form}
</article>
`;
}

export interface ApprovalsView {
  readonly state: ApprovalState | undefined;
  readonly approvals: readonly ApprovalRecord[] | null;
  readonly limit: number;
  readonly error: string | null;
  readonly csrf: string;
  readonly requested: number | null;
  /** This page's path, where the forms come back to. */
  readonly self: string;
  /** The approval a form just decided (`?decided=`), when the store has it. */
  readonly decided?: ApprovalRecord | null;
}

export function renderApprovalsPage(view: ApprovalsView): SafeHtml {
  const pill = (state: ApprovalState | undefined): SafeHtml => {
    const href = state === undefined ? '/ui/approvals' : `/ui/approvals?state=${state}`;
    return html`<li><a href="${href}"${view.state === state ? html` class="active"` : ''}>${state ?? 'all'}${
      state === 'requested' && view.requested ? html`<b>${view.requested}</b>` : ''
    }</a></li>`;
  };
  let body: SafeHtml;
  if (view.approvals === null) body = html``;
  else if (view.approvals.length === 0)
    body = html`<p class="banner note">No ${view.state ?? ''} approval.${view.state === 'requested' ? ' Nothing is waiting for a decision.' : ''}</p>`;
  else
    body = html`<div class="cards" id="approvals">${view.approvals.map((a) =>
      renderApprovalCard(a, { csrf: view.csrf, back: view.self, showOperation: true }),
    )}</div>
${view.approvals.length >= view.limit ? html`<p class="muted">Showing the newest ${view.limit}.</p>` : ''}`;
  return page(
    { title: 'Approvals', csrf: view.csrf, active: 'approvals', requested: view.requested },
    html`<h1>Approvals${view.state === undefined ? '' : html` <span class="muted">· ${view.state}</span>`}</h1>
${view.decided ? approvalConfirmation(view.decided, `${operationHref(view.decided.operationId)}#approval-${view.decided.id}`) : ''}
<ul class="pills" aria-label="Approvals per state">${pill(undefined)}${APPROVAL_STATES.map(pill)}</ul>
${view.error === null ? '' : html`<p class="banner error" role="alert">${view.error}</p>`}
${body}`,
  );
}

/** `GET /ui/approvals?state=&limit=[&decided=<approval id>]`. */
export async function serveApprovalsPage(
  req: IncomingMessage,
  res: ServerResponse,
  ctx: UiContext,
  query: URLSearchParams,
  csrf: string,
  self: string,
): Promise<void> {
  const rawState = param(query, 'state');
  const rawLimit = param(query, 'limit');
  const decidedId = validName(param(query, 'decided'));
  let state: ApprovalState | undefined;
  let limit = DEFAULT_LIST_LIMIT;
  let error: string | null = null;
  try {
    state = rawState === undefined || rawState === 'all' ? undefined : parseApprovalState('state', rawState);
    if (rawLimit !== undefined) limit = parseLimit('limit', rawLimit);
  } catch (err) {
    if (!(err instanceof InputError)) throw err;
    error = err.message;
  }
  const [approvals, requested, decided] = await Promise.all([
    error === null
      ? ctx.store.listApprovals({ ...(state === undefined ? {} : { state }), limit })
      : Promise.resolve(null),
    requestedCount(ctx.store),
    // The decided card has usually left the list it was decided on (requested): read it by id.
    decidedId === undefined ? Promise.resolve(null) : ctx.store.getApproval(decidedId),
  ]);
  sendHtml(
    req,
    res,
    error === null ? 200 : 400,
    renderApprovalsPage({ state, approvals, limit, error, csrf, requested, self, decided }),
  );
}

/** A crafted `?decided=` that could never be an id (a NUL, too long) is simply no confirmation. */
function validName(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  try {
    return parseName('approval id', value);
  } catch {
    return undefined;
  }
}
