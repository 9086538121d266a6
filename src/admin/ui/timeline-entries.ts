/**
 * The rows of an operation's timeline: decisions, attempts, observations and approval steps. The
 * operation's header states the request once (route, request, authority, fingerprint: the first
 * attempt's); a row repeats none of it and shows only what differs, so a long retry chain reads
 * as what changed from one attempt to the next.
 */
import {
  type ApprovalEntry,
  type AttemptEntry,
  type DecisionEntry,
  idempotencySummary,
  type ObservationEntry,
  shadowSummary,
  type TrailEntry,
} from '../trail.js';
import { html, join, type SafeHtml } from './html.js';
import { httpUrl, refHtml } from './links.js';
import { displayTime, operationHref } from './operations-page.js';
import { runHref } from './runs-page.js';

export interface RowContext {
  /** The operation the timeline belongs to. */
  readonly operationId: string;
  /** Attempt id → its number, for links between rows. */
  readonly attempts: ReadonlyMap<string, number>;
  /** The request the header shows (the first attempt's); `null` before any attempt. */
  readonly base: AttemptEntry | null;
  /** Why the request matched the tool, as the header shows it (the first decision's). */
  readonly explain: string | null;
}

export const dash = (v: string | null | undefined): string =>
  v === null || v === undefined || v === '' ? '-' : v;

/** `POST api.github.com/repos/acme/app/issues` (the port only when it is not the scheme's). */
export function requestLine(a: AttemptEntry): string {
  const d = a.destination;
  const defaultPort = (d.scheme === 'https' && d.port === 443) || (d.scheme === 'http' && d.port === 80);
  return `${d.method} ${d.host}${defaultPort ? '' : `:${d.port}`} ${d.path}`;
}

export function renderEntry(e: TrailEntry, ctx: RowContext): SafeHtml {
  const id =
    e.type === 'attempt'
      ? `attempt-${e.attempt_id}`
      : e.type === 'decision'
        ? `decision-${e.decision_id}`
        : e.type === 'observation'
          ? `observation-${e.observation_id}`
          : null;
  let body: SafeHtml;
  switch (e.type) {
    case 'decision':
      body = decisionBody(e, ctx);
      break;
    case 'attempt':
      body = attemptBody(e, ctx);
      break;
    case 'observation':
      body = observationBody(e);
      break;
    case 'approval':
      body = approvalBody(e, ctx.attempts);
      break;
  }
  return html`<li class="t-${e.type}"${id === null ? '' : html` id="${id}"`} data-kind="${e.type}">
  <time datetime="${e.at}">${displayTime(e.at)}</time>
  <div class="entry">${body}</div>
</li>
`;
}

function attemptRef(attemptId: string | null, attempts: ReadonlyMap<string, number>): SafeHtml {
  if (attemptId === null) return html`-`;
  const n = attempts.get(attemptId);
  return n === undefined ? html`<code>${attemptId}</code>` : html`<a href="#attempt-${attemptId}">#${n}</a>`;
}

function runStep(runId: string, step: string | null, worker: string | null = null): SafeHtml {
  return html`run <a class="mono" href="${runHref(runId)}">${runId}</a>${step ? html` · step ${step}` : ''}${
    worker ? html` · worker <b class="worker">${worker}</b>` : ''
  }`;
}

function decisionBody(e: DecisionEntry, ctx: RowContext): SafeHtml {
  const lines: SafeHtml[] = [
    html`<p class="head"><span class="kind">decision</span> <b>${e.verdict}</b>${e.reason ? html` (${e.reason})` : ''} · ${runStep(e.run_id, e.step)}</p>`,
  ];
  if (e.verdict === 'duplicate' && e.source_operation_id !== null) {
    const src = e.source_operation_id;
    lines.push(
      html`<p>skipped as a duplicate of <a class="source-link mono" href="${operationHref(src)}">${src === ctx.operationId ? `this operation (${src})` : src}</a>: nothing was sent; the earlier response was not replayed.</p>`,
    );
  }
  // Shadow mode: the request went out although enforce mode would have stopped it.
  const shadow = shadowSummary(e);
  if (shadow !== null) {
    const src = e.source_operation_id;
    lines.push(
      html`<p class="shadow">${shadow}${src === null ? '' : html` · earlier operation <a class="source-link mono" href="${operationHref(src)}">${src === ctx.operationId ? `this operation (${src})` : src}</a>`}</p>`,
    );
  }
  if (e.attempt_id !== null) lines.push(html`<p>made attempt ${attemptRef(e.attempt_id, ctx.attempts)}</p>`);
  if (e.explain !== ctx.explain) lines.push(html`<p class="muted wrap">matched ${e.explain}</p>`);
  return join(lines);
}

function attemptBody(e: AttemptEntry, ctx: RowContext): SafeHtml {
  const base = ctx.base;
  const dispatch = e.dispatch_state ?? 'in flight';
  const line = requestLine(e);
  const lines: SafeHtml[] = [
    html`<p class="head"><span class="kind">attempt</span> <b>#${e.number}</b> <span class="badge d-${e.dispatch_state ?? 'inflight'}">${dispatch}</span>${
      base === null || line !== requestLine(base) ? html` <span class="wrap">${line}</span>` : ''
    }</p>`,
    html`<p class="by">by ${runStep(e.run_id, e.step, e.worker)}</p>`,
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
  // What the header does not already say for this attempt.
  const differs: SafeHtml[] = [];
  if (base === null || e.destination.route !== base.destination.route)
    differs.push(html`route <code>${e.destination.route}</code>`);
  if (base === null || e.authority_ref !== base.authority_ref)
    differs.push(html`authority <code>${dash(e.authority_ref)}</code>`);
  if (base === null || e.request_fingerprint !== base.request_fingerprint)
    differs.push(html`fingerprint <code>${e.request_fingerprint}</code>`);
  if (differs.length > 0) lines.push(html`<p class="wrap">${join(differs, ' · ')}</p>`);
  const key = idempotencySummary(e);
  if (key !== null) lines.push(html`<p class="wrap idempotency">${key}</p>`);
  const summary = summaryHtml(e);
  lines.push(
    html`<p class="wrap response">response: ${e.replayed === true ? html`<span class="replayed">${summary}</span>` : summary}${
      e.duration_ms === null ? '' : html` <span class="muted">(${formatMs(e.duration_ms)})</span>`
    }${e.response_fingerprint ? html` <span class="muted">· response <code>${e.response_fingerprint}</code></span>` : ''}</p>`,
  );
  if (e.recovered_at !== null)
    lines.push(
      html`<p>marked sent_no_response by crash recovery at <time datetime="${e.recovered_at}">${displayTime(e.recovered_at)}</time></p>`,
    );
  return join(lines);
}

/** The response summary, its `ref …` a link when the reference is an http(s) URL. */
function summaryHtml(e: AttemptEntry): SafeHtml {
  const ref = e.destination_ref;
  const marker = ref === null ? '' : `ref ${ref}`;
  const at = ref === null || httpUrl(ref) === null ? -1 : e.response_summary.indexOf(marker);
  if (at === -1) return html`${e.response_summary}`;
  return html`${e.response_summary.slice(0, at)}ref ${refHtml(ref)}${e.response_summary.slice(at + marker.length)}`;
}

function formatMs(ms: number): string {
  return `${Number.isInteger(ms) ? ms : ms.toFixed(1)} ms`;
}

function observationBody(e: ObservationEntry): SafeHtml {
  const lines: SafeHtml[] = [
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

/** The references an operator's decision, a callback or a read-back brought. */
export function evidenceRefs(f: Readonly<Record<string, unknown>>): unknown[] {
  return Array.isArray(f['refs'])
    ? (f['refs'] as unknown[])
    : f['destinationRef']
      ? [f['destinationRef']]
      : [];
}

/** An operator's decision, a callback, a read-back or a note: who said what, and what it settled. */
function outsideEvidence(e: ObservationEntry, f: Record<string, unknown>): SafeHtml {
  const refs = evidenceRefs(f);
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

function approvalBody(e: ApprovalEntry, attempts: ReadonlyMap<string, number>): SafeHtml {
  const lines: SafeHtml[] = [
    html`<p class="head"><span class="kind">approval</span> <b>${e.event}</b>${e.by ? html` by ${e.by}` : ''}${e.reason ? html`: ${e.reason}` : ''} <a class="muted mono" href="#approval-${e.approval_id}">(${e.approval_id})</a></p>`,
  ];
  if (e.planned_recovery) lines.push(html`<p class="wrap">planned: ${e.planned_recovery}</p>`);
  if (e.attempt_id) lines.push(html`<p>used by attempt ${attemptRef(e.attempt_id, attempts)}</p>`);
  if (e.grant_id) lines.push(html`<p class="grant">under session grant <code>${e.grant_id}</code></p>`);
  return join(lines);
}
