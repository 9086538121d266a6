/**
 * `GET /ui/operations/:id`: the investigation view of one operation (docs/design.md §3), the same report
 * as `effectgate trail` and `GET /api/operations/:id`: state on top, the intent, then the timeline
 * of decisions, attempts, observations and approval steps, then the approval cards.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { OperationState } from '../../store/index.js';
import { SETTLED_STATES } from '../../store/index.js';
import { MAX_BY_CHARS, MAX_REASON_CHARS } from '../admin-input.js';
import { type AttemptEntry, loadOperationReport, type OperationReport } from '../trail.js';
import { renderApprovalCard } from './approvals-page.js';
import { approvalConfirmation, resolutionConfirmation } from './confirmation.js';
import { html, join, keyText, type SafeHtml } from './html.js';
import { page, stateMark } from './layout.js';
import { refHtml } from './links.js';
import { displayTime, operationHref } from './operations-page.js';
import { runHref } from './runs-page.js';
import { dash, evidenceRefs, renderEntry, requestLine } from './timeline-entries.js';
import { param, requestedCount, type UiContext } from './ui-context.js';
import { pageId, sendHtml, UiError } from './ui-http.js';

export interface OperationView {
  readonly report: OperationReport;
  readonly csrf: string;
  readonly requested: number | null;
  /** This page's path, where the approval forms come back to. */
  readonly self: string;
  /** The approval (`?decided=`) or observation (`?resolved=`) a form just recorded, if it is this operation's. */
  readonly confirm?: { readonly decided?: string | undefined; readonly resolved?: string | undefined };
}

/** What each state means for whoever decides what to do next. */
const MEANING: Readonly<Record<OperationState, string>> = {
  open: 'In flight, or waiting for its next attempt: no final outcome is recorded yet.',
  succeeded: "The effect happened: the destination's response (or a reconciliation lookup) confirmed it.",
  failed: 'The last attempt failed definitely (nothing took effect); a new proposal may retry it.',
  unknown:
    "Nobody knows whether the effect happened. A retry needs a reconciliation lookup, the destination's idempotency guarantee, or an operator's approval of that very retry.",
  cancelled: 'Cancelled: no further attempt will be made.',
  duplicate_effect_confirmed:
    'The effect happened MORE THAN ONCE at the destination: reconciliation found several matching items.',
  accepted:
    "The destination accepted the work and has not finished it: its key stays reserved. A reconciliation lookup, the destination's callback or an operator's resolve settles it.",
};

export function renderOperationPage(view: OperationView): SafeHtml {
  const { report } = view;
  const op = report.trail.operation;
  const attemptNumbers = new Map(
    report.trail.timeline.flatMap((e) => (e.type === 'attempt' ? [[e.attempt_id, e.number] as const] : [])),
  );
  const base =
    report.trail.timeline.find((e): e is AttemptEntry => e.type === 'attempt' && e.number === 1) ??
    report.trail.timeline.find((e): e is AttemptEntry => e.type === 'attempt') ??
    null;
  const explain = report.decisions.find((d) => d.operationId === op.id)?.explain ?? null;
  const duplicates = report.decisions.filter((d) => d.verdict === 'duplicate').length;
  const result = resultRef(report);
  const opLink = (id: string): SafeHtml =>
    id === op.id
      ? html`<a class="mono" href="${operationHref(id)}">this operation</a>`
      : html`<a class="mono" href="${operationHref(id)}">${id}</a>`;

  const hero = html`<section class="hero s-${op.state}" id="state" data-state="${op.state}">
  <div class="state">${stateMark(op.state)}${op.state.toUpperCase()}</div>
  <div class="meaning">${MEANING[op.state]}</div>
</section>`;

  const facts = html`<dl class="facts" id="intent">
  <dt>tool</dt><dd class="wrap">${op.tool}</dd>
  <dt>scope</dt><dd class="wrap">${op.scope.tenant} / ${op.scope.area} / ${op.scope.agent}</dd>
  <dt>key values</dt><dd class="wrap"><code id="key-values">${keyText(op.key_values)}</code>${op.key_hash === null ? '' : html` <span class="muted mono" title="key hash">${op.key_hash}</span>`}</dd>
  <dt>idempotency</dt><dd class="wrap">${op.idempotency === null ? html`<span class="muted">none injected</span>` : html`<code>${op.idempotency.header}: ${op.idempotency.key}</code> <span class="muted">(the operation's key; what each attempt sent, the agent's own key when kept, is on the attempt)</span>`}</dd>
  <dt>owner</dt><dd class="wrap">run <a class="mono" href="${runHref(op.owner.run_id)}">${op.owner.run_id}</a> · step ${dash(op.owner.step)} · worker ${dash(op.owner.worker)} · agent ${dash(op.owner.agent_version)}</dd>
  ${op.supersedes_operation_id === null ? '' : html`<dt>supersedes</dt><dd>${opLink(op.supersedes_operation_id)} <span class="muted">(the request changed materially: a new operation, not a retry)</span></dd>`}
  ${op.superseded_by.length === 0 ? '' : html`<dt>superseded by</dt><dd>${join(op.superseded_by.map(opLink), ', ')}</dd>`}
  ${
    base === null
      ? ''
      : html`<dt>route</dt><dd class="wrap"><code>${base.destination.route}</code>${explain !== null && explain !== base.destination.route ? html` <span class="muted">· matched ${explain}</span>` : ''}</dd>
  <dt>request</dt><dd class="wrap"><code>${requestLine(base)}</code> · authority <code>${dash(base.authority_ref)}</code> · fingerprint <code>${base.request_fingerprint}</code>${op.attempts > 1 ? html` <span class="muted">(attempt #${base.number}; a later attempt says what differs)</span>` : ''}</dd>`
  }
  ${result === null ? '' : html`<dt>result</dt><dd class="wrap" id="result">${refHtml(result)} <span class="muted">(the destination's reference the gate answers a duplicate with)</span></dd>`}
  <dt>attempts</dt><dd>${op.attempts}</dd>
  <dt>duplicates</dt><dd id="duplicates" data-duplicates="${duplicates}">${duplicates === 0 ? html`<span class="muted">none absorbed</span>` : html`<b>${duplicates}</b> absorbed: proposed again, answered as duplicates, nothing sent`}</dd>
  <dt>created</dt><dd><time datetime="${op.created_at}">${displayTime(op.created_at)}</time> <span class="muted">· updated</span> <time datetime="${op.updated_at}">${displayTime(op.updated_at)}</time></dd>
</dl>`;

  const timeline =
    report.trail.timeline.length === 0
      ? html`<p class="muted">Nothing recorded yet.</p>`
      : html`<ol class="timeline" id="timeline">
${report.trail.timeline.map((e) => renderEntry(e, { operationId: op.id, attempts: attemptNumbers, base, explain }))}
</ol>`;

  const approvals = [...report.approvals].sort((a, b) => (a.requestedAt < b.requestedAt ? 1 : -1));
  const cards =
    approvals.length === 0
      ? html`<p class="muted">No approval was requested for this operation.</p>`
      : html`<div class="cards">${approvals.map((a) =>
          renderApprovalCard(a, {
            csrf: view.csrf,
            back: `${view.self}#approval-${a.id}`,
            showOperation: false,
          }),
        )}</div>`;

  return page(
    { title: `Operation ${op.id}`, csrf: view.csrf, active: 'operations', requested: view.requested },
    html`${confirmation(view)}${hero}
<h1>Operation <code>${op.id}</code></h1>
${facts}
${resolveForm(view)}
<h2>Timeline</h2>
${timeline}
<h2 id="approvals">Approvals</h2>
${cards}`,
  );
}

/**
 * The operator's resolution (docs/design.md §3 "Observations"), shown while nobody knows the outcome:
 * `unknown`, or `open` (the store refuses one whose attempt is still in flight, and says so).
 */
function resolveForm(view: OperationView): SafeHtml | string {
  const op = view.report.trail.operation;
  if (op.state !== 'unknown' && op.state !== 'open') return '';
  const action = `/ui/operations/${encodeURIComponent(op.id)}/resolve`;
  return html`<section class="resolve" id="resolve">
<h2>Resolve</h2>
<p class="muted">Checked the destination? Record what you found. Succeeded or a confirmed duplicate keeps the key (a repeat is answered as a duplicate); failed releases it, so the next proposal is a retry of this operation with the same idempotency key. No attempt is changed.${op.state === 'open' ? ' An open operation can be resolved only once its attempt is past its deadline without an outcome.' : ''}</p>
<form class="decide" method="post" action="${action}" aria-label="Resolve operation ${op.id}">
  <input type="hidden" name="csrf" value="${view.csrf}">
  <label>Found <select name="as" required>${SETTLED_STATES.map((s) => html`<option value="${s}">${s}</option>`)}</select></label>
  <label>By <input name="by" required maxlength="${MAX_BY_CHARS}" placeholder="you@example.com" autocomplete="username"></label>
  <label class="wide">Reason <input name="reason" required maxlength="${MAX_REASON_CHARS}" placeholder="what you checked and saw"></label>
  <label class="wide">Reference(s) <textarea name="ref" rows="2" placeholder="the issue URL or refund id; one per line for a duplicate"></textarea></label>
  <div class="buttons"><button type="submit" class="approve">Resolve</button></div>
</form>
</section>`;
}

/** The banner for what a form on this page just recorded: only a record of this operation gets one. */
function confirmation(view: OperationView): SafeHtml | null {
  const { decided, resolved } = view.confirm ?? {};
  const approval = decided === undefined ? undefined : view.report.approvals.find((a) => a.id === decided);
  if (approval !== undefined) return approvalConfirmation(approval, `#approval-${approval.id}`);
  const observation =
    resolved === undefined ? undefined : view.report.observations.find((o) => o.id === resolved);
  return observation === undefined ? null : resolutionConfirmation(observation);
}

/**
 * The reference a duplicate is answered with, as the store picks it when the key moved on
 * (eg_delegated.sql): the one the evidence that settled the operation brought, else the last one
 * a response carried.
 */
function resultRef(report: OperationReport): string | null {
  const op = report.operation;
  const settling = report.observations.filter((o) => o.result === op.state).at(-1);
  const evidence = settling === undefined ? undefined : evidenceRefs(settling.facts)[0];
  if (typeof evidence === 'string' && evidence !== '') return evidence;
  const attempt = [...op.attempts].sort((a, b) => b.number - a.number).find((a) => a.destinationRef !== null);
  return attempt?.destinationRef ?? null;
}

/** `GET /ui/operations/:id[?decided=<approval id>|?resolved=<observation id>]`. */
export async function serveOperationPage(
  req: IncomingMessage,
  res: ServerResponse,
  ctx: UiContext,
  rawId: string,
  query: URLSearchParams,
  csrf: string,
): Promise<void> {
  const id = pageId('operation', rawId);
  const [report, requested] = await Promise.all([
    loadOperationReport(ctx.store, id),
    requestedCount(ctx.store),
  ]);
  if (report === null) throw new UiError(404, 'Not found', `No operation ${JSON.stringify(id)}.`);
  const confirm = { decided: param(query, 'decided'), resolved: param(query, 'resolved') };
  sendHtml(req, res, 200, renderOperationPage({ report, csrf, requested, self: operationHref(id), confirm }));
}
