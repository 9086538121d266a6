/**
 * `GET /ui/operations/:id`: the investigation view of one operation (DESIGN.md §3), the same report
 * as `effectgate trail` and `GET /api/operations/:id`: state on top, the intent, then the timeline
 * of decisions, attempts, observations and approval steps, then the approval cards.
 */
import type { OperationState } from '../../store/index.js';
import { SETTLED_STATES } from '../../store/index.js';
import { MAX_BY_CHARS, MAX_REASON_CHARS } from '../admin-input.js';
import type {
  ApprovalEntry,
  AttemptEntry,
  DecisionEntry,
  ObservationEntry,
  OperationReport,
  TrailEntry,
} from '../trail.js';
import { renderApprovalCard } from './approvals-page.js';
import { type Html, html, join, keyText } from './html.js';
import { page, stateMark } from './layout.js';
import { displayTime, operationHref } from './operations-page.js';
import { runHref } from './runs-page.js';

export interface OperationView {
  readonly report: OperationReport;
  readonly csrf: string;
  readonly requested: number | null;
  /** This page's path, where the approval forms come back to. */
  readonly self: string;
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
};

const dash = (v: string | null | undefined): string => (v === null || v === undefined || v === '' ? '-' : v);

export function renderOperationPage(view: OperationView): Html {
  const { report } = view;
  const op = report.trail.operation;
  const attemptNumbers = new Map(
    report.trail.timeline.flatMap((e) => (e.type === 'attempt' ? [[e.attempt_id, e.number] as const] : [])),
  );
  const opLink = (id: string): Html =>
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
  <dt>idempotency</dt><dd class="wrap">${op.idempotency === null ? html`<span class="muted">none injected</span>` : html`<code>${op.idempotency.header}: ${op.idempotency.key}</code> <span class="muted">(every attempt sends the same key)</span>`}</dd>
  <dt>owner</dt><dd class="wrap">run <a class="mono" href="${runHref(op.owner.run_id)}">${op.owner.run_id}</a> · step ${dash(op.owner.step)} · worker ${dash(op.owner.worker)} · agent ${dash(op.owner.agent_version)}</dd>
  ${op.supersedes_operation_id === null ? '' : html`<dt>supersedes</dt><dd>${opLink(op.supersedes_operation_id)} <span class="muted">(the request changed materially: a new operation, not a retry)</span></dd>`}
  ${op.superseded_by.length === 0 ? '' : html`<dt>superseded by</dt><dd>${join(op.superseded_by.map(opLink), ', ')}</dd>`}
  <dt>attempts</dt><dd>${op.attempts}</dd>
  <dt>created</dt><dd><time datetime="${op.created_at}">${displayTime(op.created_at)}</time> <span class="muted">· updated</span> <time datetime="${op.updated_at}">${displayTime(op.updated_at)}</time></dd>
</dl>`;

  const timeline =
    report.trail.timeline.length === 0
      ? html`<p class="muted">Nothing recorded yet.</p>`
      : html`<ol class="timeline" id="timeline">
${report.trail.timeline.map((e) => renderEntry(e, op.id, attemptNumbers))}
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
    html`${hero}
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
 * The operator's resolution (DESIGN.md §3 "Observations"), shown while nobody knows the outcome:
 * `unknown`, or `open` (the store refuses one whose attempt is still in flight, and says so).
 */
function resolveForm(view: OperationView): Html | string {
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

function renderEntry(e: TrailEntry, self: string, attempts: ReadonlyMap<string, number>): Html {
  const id =
    e.type === 'attempt'
      ? `attempt-${e.attempt_id}`
      : e.type === 'decision'
        ? `decision-${e.decision_id}`
        : e.type === 'observation'
          ? `observation-${e.observation_id}`
          : null;
  let body: Html;
  switch (e.type) {
    case 'decision':
      body = decisionBody(e, self, attempts);
      break;
    case 'attempt':
      body = attemptBody(e);
      break;
    case 'observation':
      body = observationBody(e);
      break;
    case 'approval':
      body = approvalBody(e, attempts);
      break;
  }
  return html`<li class="t-${e.type}"${id === null ? '' : html` id="${id}"`} data-kind="${e.type}">
  <time datetime="${e.at}">${displayTime(e.at)}</time>
  <div class="entry">${body}</div>
</li>
`;
}

function attemptRef(attemptId: string | null, attempts: ReadonlyMap<string, number>): Html {
  if (attemptId === null) return html`-`;
  const n = attempts.get(attemptId);
  return n === undefined ? html`<code>${attemptId}</code>` : html`<a href="#attempt-${attemptId}">#${n}</a>`;
}

function decisionBody(e: DecisionEntry, self: string, attempts: ReadonlyMap<string, number>): Html {
  const lines: Html[] = [
    html`<p class="head"><span class="kind">decision</span> <b>${e.verdict}</b>${e.reason ? html` (${e.reason})` : ''} · run <a class="mono" href="${runHref(e.run_id)}">${e.run_id}</a>${e.step ? html` · step ${e.step}` : ''}</p>`,
  ];
  if (e.verdict === 'duplicate' && e.source_operation_id !== null) {
    const src = e.source_operation_id;
    lines.push(
      html`<p>skipped as a duplicate of <a class="source-link mono" href="${operationHref(src)}">${src === self ? `this operation (${src})` : src}</a>: nothing was sent; the earlier response was not replayed.</p>`,
    );
  }
  if (e.attempt_id !== null) lines.push(html`<p>made attempt ${attemptRef(e.attempt_id, attempts)}</p>`);
  lines.push(html`<p class="muted wrap">matched ${e.explain}</p>`);
  return join(lines);
}

function attemptBody(e: AttemptEntry): Html {
  const d = e.destination;
  const defaultPort = (d.scheme === 'https' && d.port === 443) || (d.scheme === 'http' && d.port === 80);
  const dispatch = e.dispatch_state ?? 'in flight';
  const lines: Html[] = [
    html`<p class="head"><span class="kind">attempt</span> <b>#${e.number}</b> <span class="badge d-${e.dispatch_state ?? 'inflight'}">${dispatch}</span> <span class="wrap">${d.method} ${d.host}${defaultPort ? '' : `:${d.port}`} ${d.path}</span></p>`,
    html`<p class="by">by run <a class="mono" href="${runHref(e.run_id)}">${e.run_id}</a>${e.step ? html` · step ${e.step}` : ''}${e.worker ? html` · worker <b class="worker">${e.worker}</b>` : ''}</p>`,
  ];
  if (e.retry_of_number !== null) {
    lines.push(
      html`<p class="retry">retry of <a href="#attempt-${e.retry_of_attempt_id ?? ''}">#${e.retry_of_number}</a>: reason <b>${e.retry_reason ?? 'none in the closed set'}</b>, decision <b>${dash(e.retry_decision)}</b>, ${e.remaining_attempts ?? '?'} attempt(s) left; ${
        e.fingerprint_changed
          ? html`<span class="changed">request CHANGED</span>`
          : html`<span class="same">same request</span>`
      }</p>`,
    );
  } else if (e.remaining_attempts !== null) {
    lines.push(
      html`<p class="muted">first attempt; ${e.remaining_attempts} more attempt(s) in the budget</p>`,
    );
  }
  lines.push(
    html`<p class="wrap">route <code>${e.destination.route}</code> · authority <code>${dash(e.authority_ref)}</code> · fingerprint <code>${e.request_fingerprint}</code></p>`,
  );
  const summary =
    e.replayed === true
      ? html`<span class="replayed">${e.response_summary}</span>`
      : html`${e.response_summary}`;
  lines.push(
    html`<p class="wrap response">response: ${summary}${e.duration_ms === null ? '' : html` <span class="muted">(${formatMs(e.duration_ms)})</span>`}</p>`,
  );
  if (e.recovered_at !== null)
    lines.push(
      html`<p>marked sent_no_response by crash recovery at <time datetime="${e.recovered_at}">${displayTime(e.recovered_at)}</time></p>`,
    );
  lines.push(
    html`<p class="muted wrap">run <a class="mono" href="${runHref(e.run_id)}">${e.run_id}</a>${e.step ? html` · step ${e.step}` : ''}${e.worker ? html` · worker ${e.worker}` : ''}${e.response_fingerprint ? html` · response <code>${e.response_fingerprint}</code>` : ''}</p>`,
  );
  return join(lines);
}

function formatMs(ms: number): string {
  return `${Number.isInteger(ms) ? ms : ms.toFixed(1)} ms`;
}

function observationBody(e: ObservationEntry): Html {
  const lines: Html[] = [
    html`<p class="head"><span class="kind">observation</span> ${e.kind}: <b>${e.result}</b></p>`,
  ];
  const f = e.facts as Record<string, unknown>;
  if (e.kind === 'reconciliation') {
    const refs = Array.isArray(f['remoteRefs']) ? (f['remoteRefs'] as unknown[]) : [];
    lines.push(
      html`<p class="wrap">looked up <code>${String(f['endpoint'] ?? '?')}</code>: ${String(f['matches'] ?? 0)} match(es)${
        refs.length > 0 ? html`, refs ${join(refs.map(refHtml), ', ')}` : ''
      }${f['status'] === null || f['status'] === undefined ? '' : html` · status ${String(f['status'])}`}${f['error'] ? html`; ${String(f['error'])}` : ''}</p>`,
    );
    lines.push(
      html`<p><b>${
        e.result === 'match'
          ? 'The effect is at the destination: the operation succeeded (via reconciliation).'
          : e.result === 'multiple'
            ? 'The effect is there MORE THAN ONCE: duplicate_effect_confirmed.'
            : e.result === 'inconclusive'
              ? 'The lookup gave no usable answer: the outcome stays unknown.'
              : 'Absence proves little: the outcome stays unknown.'
      }</b></p>`,
    );
  } else if (e.kind === 'gate_restarted') {
    lines.push(
      html`<p>The gate stopped mid-dispatch; after the restart this attempt was marked sent_no_response.</p>`,
    );
  } else if (e.kind === 'outcome_lost') {
    lines.push(
      html`<p>No outcome was recorded before the reservation expired; the attempt was marked sent_no_response.</p>`,
    );
  } else {
    lines.push(outsideEvidence(e, f));
  }
  return join(lines);
}

/** An operator's decision, a callback, a read-back or a note: who said what, and what it settled. */
function outsideEvidence(e: ObservationEntry, f: Record<string, unknown>): Html {
  const refs = Array.isArray(f['refs'])
    ? (f['refs'] as unknown[])
    : f['destinationRef']
      ? [f['destinationRef']]
      : [];
  const said = html`by <b>${String(f['by'] ?? '?')}</b>${f['reason'] ? html`: ${String(f['reason'])}` : ''}${
    f['status'] === undefined ? '' : html` · status ${String(f['status'])}`
  }${refs.length > 0 ? html` · ref ${join(refs.map(refHtml), ', ')}` : ''}${
    f['payloadFingerprint'] ? html` · payload <code>${String(f['payloadFingerprint'])}</code>` : ''
  }`;
  const meaning =
    e.result === 'noted'
      ? 'Recorded as evidence; the state did not change.'
      : e.result === 'not_settled'
        ? `It said ${String(f['settles'] ?? '?')}, but the operation was already ${String(f['stateAtObservation'] ?? '?')}: kept as evidence, nothing changed.`
        : `Settled the operation as ${e.result} (it was ${String(f['stateAtObservation'] ?? '?')}).`;
  return html`<p class="wrap">${said}</p><p><b>${meaning}</b></p>`;
}

/** A remote reference: shown as text (never a link: the URL came from a destination's response). */
function refHtml(ref: unknown): Html {
  return html`<code>${ref === null ? 'null' : String(ref)}</code>`;
}

function approvalBody(e: ApprovalEntry, attempts: ReadonlyMap<string, number>): Html {
  const lines: Html[] = [
    html`<p class="head"><span class="kind">approval</span> <b>${e.event}</b>${e.by ? html` by ${e.by}` : ''}${e.reason ? html`: ${e.reason}` : ''} <a class="muted mono" href="#approval-${e.approval_id}">(${e.approval_id})</a></p>`,
  ];
  if (e.planned_recovery) lines.push(html`<p class="wrap">planned: ${e.planned_recovery}</p>`);
  if (e.attempt_id) lines.push(html`<p>used by attempt ${attemptRef(e.attempt_id, attempts)}</p>`);
  if (e.grant_id) lines.push(html`<p class="grant">under session grant <code>${e.grant_id}</code></p>`);
  return join(lines);
}
