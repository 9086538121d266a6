/**
 * Runs: `GET /ui/runs` lists the runs the loop breaker knows, halted first;
 * `GET /ui/runs/:id` shows one run: per scope its halt and releases with a Release form, then
 * every decision it made, each linked to its operation. A halted run is the one thing an operator
 * must act on here, so it leads the page.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { DecisionRecord, RunRecord } from '../../store/index.js';
import { DEFAULT_LIST_LIMIT, MAX_BY_CHARS, MAX_REASON_CHARS } from '../admin-input.js';
import { formValue, html, type SafeHtml } from './html.js';
import { page } from './layout.js';
import { displayTime, operationHref } from './operations-page.js';
import { param, requestedCount, type UiContext } from './ui-context.js';
import { pageId, sendHtml, UiError } from './ui-http.js';

/** A run's page (the gate refuses `.` and `..` as run ids: a browser would drop the segment). */
export function runHref(id: string): string {
  return `/ui/runs/${encodeURIComponent(id)}`;
}

export interface RunsView {
  readonly runs: readonly RunRecord[];
  readonly halted: boolean;
  readonly limit: number;
  readonly csrf: string;
  readonly requested: number | null;
}

export function renderRunsPage(view: RunsView): SafeHtml {
  const rows = view.runs.map(
    (r) => html`<tr data-run-id="${r.id}" class="${r.haltedAt === null ? '' : 'halted'}">
  <td><a class="mono" href="${runHref(r.id)}">${r.id}</a></td>
  <td>${r.scope.tenant} / ${r.scope.area} / ${r.scope.agent}</td>
  <td>${r.haltedAt === null ? html`<span class="badge">running</span>` : html`<span class="badge s-unknown">⚠ halted</span> <time datetime="${r.haltedAt}">${displayTime(r.haltedAt)}</time>`}</td>
  <td class="num">${String(r.duplicateSkips)}</td>
  <td class="num">${String(r.releases.length)}</td>
</tr>`,
  );
  return page(
    { title: 'Runs', csrf: view.csrf, active: 'runs', requested: view.requested },
    html`<h1>Runs${view.halted ? html` <span class="muted">· halted</span>` : ''}</h1>
<ul class="pills" aria-label="Runs"><li><a href="/ui/runs"${view.halted ? '' : html` class="active"`}>all</a></li><li><a href="/ui/runs?halted=true"${view.halted ? html` class="active"` : ''}>halted</a></li></ul>
<p class="muted">Runs with a duplicate skipped, a halt or a release. The loop breaker halts a run that proposes again an effect it was told is done <i>max_duplicate_skips</i> times.</p>
${
  view.runs.length === 0
    ? html`<p class="banner note">No ${view.halted ? 'halted ' : ''}run.</p>`
    : html`<div class="scroll"><table id="runs"><thead><tr><th>run</th><th>scope</th><th>state</th><th class="num">duplicates</th><th class="num">releases</th></tr></thead><tbody>${rows}</tbody></table></div>
${view.runs.length >= view.limit ? html`<p class="muted">Showing ${view.limit}.</p>` : ''}`
}`,
  );
}

export interface RunView {
  readonly id: string;
  readonly runs: readonly RunRecord[];
  readonly decisions: readonly DecisionRecord[];
  readonly csrf: string;
  readonly requested: number | null;
  /** Set after a release that still stands (its scope's latest, the run not halted again). */
  readonly released: { readonly id: string; readonly scope: RunRecord['scope'] } | null;
}

export function renderRunPage(view: RunView): SafeHtml {
  const self = runHref(view.id);
  const cards = view.runs.map((r) => runCard(r, view.csrf, self));
  const rows = view.decisions.map(
    (d) => html`<tr data-decision-id="${d.id}" data-verdict="${d.verdict}">
  <td><time datetime="${d.createdAt}">${displayTime(d.createdAt)}</time></td>
  <td><b>${d.verdict}</b>${d.reason ? html` <span class="muted wrap">${d.reason}</span>` : ''}</td>
  <td>${d.toolId}${d.step ? html` <span class="muted">· step ${d.step}</span>` : ''}</td>
  <td>${d.operationId === null ? html`<span class="muted">-</span>` : html`<a class="mono" href="${operationHref(d.operationId)}">${d.operationId}</a>`}</td>
</tr>`,
  );
  return page(
    { title: `Run ${view.id}`, csrf: view.csrf, active: 'runs', requested: view.requested },
    html`<h1>Run <code class="wrap">${view.id}</code></h1>
${view.released === null ? '' : html`<p class="banner note" role="status" id="confirmation">Released in ${view.released.scope.tenant} / ${view.released.scope.area} / ${view.released.scope.agent}: the run's next governed call there is decided as usual, and its duplicate counts start again (release <code>${view.released.id}</code>).</p>`}
${cards.length === 0 ? html`<p class="muted">The loop breaker never skipped a duplicate for this run.</p>` : html`<div class="cards">${cards}</div>`}
<h2>Decisions <span class="muted">(${String(view.decisions.length)})</span></h2>
<div class="scroll"><table id="decisions"><thead><tr><th>at</th><th>verdict</th><th>tool</th><th>operation</th></tr></thead><tbody>${rows}</tbody></table></div>`,
  );
}

function runCard(r: RunRecord, csrf: string, self: string): SafeHtml {
  const form =
    r.haltedAt === null
      ? ''
      : html`<form class="decide" method="post" action="${self}/release" aria-label="Release run ${r.id}">
  <input type="hidden" name="csrf" value="${csrf}">
  <input type="hidden" name="tenant" value="${formValue(r.scope.tenant)}"><input type="hidden" name="area" value="${formValue(r.scope.area)}"><input type="hidden" name="agent" value="${formValue(r.scope.agent)}">
  <label>By <input name="by" required maxlength="${MAX_BY_CHARS}" placeholder="you@example.com" autocomplete="username"></label>
  <label>Reason <input name="reason" required maxlength="${MAX_REASON_CHARS}" placeholder="why the run may go on"></label>
  <div class="buttons"><button type="submit" class="approve">Release</button><span class="muted">Its halt stays in the trail; its duplicate counts start again.</span></div>
</form>`;
  return html`<article class="card${r.haltedAt === null ? '' : ' k-requested'}" data-run-scope="${r.scope.tenant}/${r.scope.area}/${r.scope.agent}" data-state="${r.haltedAt === null ? 'running' : 'halted'}">
<header><span><b>${r.scope.tenant} / ${r.scope.area} / ${r.scope.agent}</b></span>${r.haltedAt === null ? html`<span class="badge">running</span>` : html`<span class="badge s-unknown">⚠ halted</span>`}</header>
<dl class="facts">
  <dt>duplicates</dt><dd>${String(r.duplicateSkips)} skipped since <time datetime="${r.firstSkipAt}">${displayTime(r.firstSkipAt)}</time></dd>
  ${r.haltedAt === null ? '' : html`<dt>halted</dt><dd class="wrap"><time datetime="${r.haltedAt}">${displayTime(r.haltedAt)}</time> by decision <code>${r.haltDecisionId ?? '?'}</code></dd>`}
  ${r.keys.length === 0 ? '' : html`<dt>skipped keys</dt><dd class="wrap">${r.keys.map((k) => html`<code title="key hash">${k.keyHash.slice(0, 16)}…</code> ×${String(k.skips)} `)}</dd>`}
  ${r.releases.map((x) => html`<dt>released</dt><dd class="wrap"><time datetime="${x.releasedAt}">${displayTime(x.releasedAt)}</time> by ${x.releasedBy}: ${x.reason}${x.haltDecisionId === null ? '' : html` <span class="muted">(halt <code>${x.haltDecisionId}</code>)</span>`}</dd>`)}
</dl>
${form}
</article>`;
}

export async function serveRunsPage(
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

export async function serveRunPage(
  req: IncomingMessage,
  res: ServerResponse,
  ctx: UiContext,
  rawId: string,
  query: URLSearchParams,
  csrf: string,
): Promise<void> {
  const id = pageId('run', rawId);
  const [runs, decisions, requested] = await Promise.all([
    ctx.store.listRuns({ runId: id }),
    ctx.store.listDecisions({ runId: id }),
    requestedCount(ctx.store),
  ]);
  if (runs.length === 0 && decisions.length === 0) {
    throw new UiError(404, 'Not found', `No run ${JSON.stringify(id)}.`);
  }
  // A confirmation only for a release that still stands: this run's, the latest of its scope, and
  // the run not halted since (a crafted or stale link shows none).
  const asked = param(query, 'released');
  const standing = runs.find((r) => r.haltedAt === null && r.releases.at(-1)?.id === asked);
  const released =
    standing === undefined || asked === undefined ? null : { id: asked, scope: standing.scope };
  sendHtml(req, res, 200, renderRunPage({ id, runs, decisions, csrf, requested, released }));
}
