/**
 * `GET /ui/` (`/ui/operations`): counts per state as filter links, a search by tool, key values,
 * tenant and time, and the matching operations, newest first.
 */
import type { OperationRecord, OperationState } from '../../store/index.js';
import { OPERATION_STATES } from '../admin-input.js';
import { type Html, html, keyText, truncate } from './html.js';
import { page, stateBadge } from './layout.js';

export interface OperationsQuery {
  readonly state?: string | undefined;
  readonly tool?: string | undefined;
  readonly key?: string | undefined;
  readonly tenant?: string | undefined;
  readonly since?: string | undefined;
  readonly limit?: string | undefined;
}

export interface OperationsView {
  readonly query: OperationsQuery;
  /** The parsed state filter, when valid. */
  readonly state: OperationState | undefined;
  /** `null` when the query was refused (see `error`). */
  readonly operations: readonly OperationRecord[] | null;
  readonly counts: Readonly<Record<OperationState, number>> | null;
  readonly limit: number;
  /** The key values searched for, as parsed (shown so "a, b" vs `["a","b"]` is never a guess). */
  readonly keyValues: readonly unknown[] | undefined;
  readonly error: string | null;
  readonly csrf: string;
  readonly requested: number | null;
}

const FILTER_FIELDS = ['tool', 'key', 'tenant', 'since', 'limit'] as const;

/** `/ui/operations?…` with the current search and the given state (or none). */
function listHref(query: OperationsQuery, state: string | undefined): string {
  const params = new URLSearchParams();
  if (state !== undefined) params.set('state', state);
  for (const f of FILTER_FIELDS) {
    const v = query[f];
    if (v !== undefined && v !== '') params.set(f, v);
  }
  const qs = params.toString();
  return qs === '' ? '/ui/operations' : `/ui/operations?${qs}`;
}

export function operationHref(id: string): string {
  return `/ui/operations/${encodeURIComponent(id)}`;
}

export function renderOperationsPage(view: OperationsView): Html {
  const q = view.query;
  const counts = view.counts;
  const total = counts === null ? null : OPERATION_STATES.reduce((n, s) => n + counts[s], 0);
  const pills =
    counts === null
      ? null
      : html`<ul class="pills" aria-label="Operations per state">
  <li><a href="${listHref(q, undefined)}"${view.state === undefined ? html` class="active"` : ''}>all<b>${total}</b></a></li>
  ${OPERATION_STATES.map((s) => {
    const classes = [
      view.state === s ? 'active' : '',
      counts[s] > 0 && s === 'unknown' ? 'hot' : '',
      counts[s] > 0 && s === 'duplicate_effect_confirmed' ? 'alarm' : '',
    ].filter((c) => c !== '');
    return html`<li><a href="${listHref(q, s)}" data-state="${s}"${classes.length > 0 ? html` class="${classes.join(' ')}"` : ''}>${s === 'unknown' || s === 'duplicate_effect_confirmed' ? (counts[s] > 0 ? '⚠ ' : '') : ''}${s}<b>${counts[s]}</b></a></li>`;
  })}
</ul>`;

  const search = html`<form class="search" method="get" action="/ui/operations" role="search">
  <label>Tool <input name="tool" value="${q.tool ?? ''}" placeholder="github.create_issue" size="22"></label>
  <label>Key values <input name="key" value="${q.key ?? ''}" placeholder='acme, api, Disk full   or   ["acme",1]' size="34"></label>
  <label>Tenant <input name="tenant" value="${q.tenant ?? ''}" size="10"></label>
  <label>Since <input name="since" value="${q.since ?? ''}" placeholder="24h, 7d, 2025-06-01" size="18"></label>
  <label>State <select name="state">
    <option value="">any</option>
    ${OPERATION_STATES.map((s) => html`<option value="${s}"${view.state === s ? html` selected` : ''}>${s}</option>`)}
  </select></label>
  ${q.limit !== undefined && q.limit !== '' ? html`<input type="hidden" name="limit" value="${q.limit}">` : ''}
  <button type="submit" class="primary">Search</button>
  <a href="/ui/operations">clear</a>
</form>`;

  const keyNote =
    view.keyValues === undefined
      ? null
      : html`<p class="muted">Key values matched exactly (in order): <code class="wrap">${keyText(view.keyValues)}</code></p>`;

  let results: Html;
  if (view.operations === null) results = html``;
  else if (view.operations.length === 0) {
    results = html`<p class="banner note">No operation matches${view.state === undefined ? '' : html` in state <b>${view.state}</b>`}.</p>`;
  } else {
    results = html`<div class="scroll"><table id="operations">
<thead><tr><th>Operation</th><th>State</th><th>Tool</th><th>Scope</th><th>Key values</th><th class="num">Attempts</th><th>Created</th></tr></thead>
<tbody>
${view.operations.map((o) => {
  const key = keyText(o.keyValues);
  return html`<tr class="r-${o.state}" data-operation-id="${o.id}">
  <td><a class="mono id" href="${operationHref(o.id)}">${o.id}</a></td>
  <td>${stateBadge(o.state)}</td>
  <td class="wrap">${o.toolId}</td>
  <td class="wrap">${o.scope.tenant} / ${o.scope.area} / ${o.scope.agent}</td>
  <td class="key wrap-any"><code title="${key}">${truncate(key, 90)}</code></td>
  <td class="num">${o.attempts.length}</td>
  <td><time datetime="${o.createdAt}">${displayTime(o.createdAt)}</time></td>
</tr>`;
})}
</tbody>
</table></div>
${view.operations.length >= view.limit ? html`<p class="muted">Showing the newest ${view.limit}; narrow the search (or raise <code>limit</code>, up to 1000) to see more.</p>` : ''}`;
  }

  return page(
    { title: 'Operations', csrf: view.csrf, active: 'operations', requested: view.requested },
    html`<h1>Operations</h1>
${pills}
${search}
${view.error === null ? '' : html`<p class="banner error" role="alert">${view.error}</p>`}
${keyNote}
${results}`,
  );
}

/** `2025-06-01T12:00:00.123Z` → `2025-06-01 12:00:00.123Z` (the store's own instant, UTC). */
export function displayTime(at: string): string {
  return at.replace('T', ' ');
}
