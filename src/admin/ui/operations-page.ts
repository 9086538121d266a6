/**
 * `GET /ui/` (`/ui/operations`): counts per state as filter links, a search by tool, key values,
 * tenant and time, and the matching operations, newest first.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  type OperationRecord,
  type OperationState,
  SHADOW_VERDICTS,
  type ShadowVerdict,
  type ShadowVerdictCount,
} from '../../store/index.js';
import { fullCounts } from '../admin-api.js';
import { DEFAULT_LIST_LIMIT, InputError, OPERATION_STATES, parseOperationFilter } from '../admin-input.js';
import { formValue, html, join, keyText, type SafeHtml, truncate } from './html.js';
import { page, stateBadge } from './layout.js';
import { param, requestedCount, type UiContext } from './ui-context.js';
import { sendHtml } from './ui-http.js';

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
  /** Duplicates each listed operation absorbed (`Store.countDuplicates`); absent = none. */
  readonly duplicates: Readonly<Record<string, number>>;
  readonly counts: Readonly<Record<OperationState, number>> | null;
  readonly limit: number;
  /** The key values searched for, as parsed (shown so "a, b" vs `["a","b"]` is never a guess). */
  readonly keyValues: readonly unknown[] | undefined;
  readonly error: string | null;
  readonly csrf: string;
  readonly requested: number | null;
  /** What shadow mode recorded instead of refusing (`Store.countShadowVerdicts`); empty: none. */
  readonly shadow: readonly ShadowVerdictCount[];
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

export function renderOperationsPage(view: OperationsView): SafeHtml {
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
  <label>Tool <input name="tool" value="${formValue(q.tool ?? '')}" placeholder="github.create_issue" size="22"></label>
  <label>Key values <input name="key" value="${formValue(q.key ?? '')}" placeholder='acme, api, Disk full   or   ["acme",1]' size="34"></label>
  <label>Tenant <input name="tenant" value="${formValue(q.tenant ?? '')}" size="10"></label>
  <label>Since <input name="since" value="${formValue(q.since ?? '')}" placeholder="24h, 7d, 2025-06-01" size="18"></label>
  <label>State <select name="state">
    <option value="">any</option>
    ${OPERATION_STATES.map((s) => html`<option value="${s}"${view.state === s ? html` selected` : ''}>${s}</option>`)}
  </select></label>
  ${q.limit !== undefined && q.limit !== '' ? html`<input type="hidden" name="limit" value="${formValue(q.limit)}">` : ''}
  <button type="submit" class="primary">Search</button>
  <a href="/ui/operations">clear</a>
</form>`;

  const keyNote =
    view.keyValues === undefined
      ? null
      : html`<p class="muted">Key values matched exactly (in order): <code class="wrap">${keyText(view.keyValues)}</code></p>`;

  let results: SafeHtml;
  if (view.operations === null) results = html``;
  else if (view.operations.length === 0) {
    results = html`<p class="banner note">No operation matches${view.state === undefined ? '' : html` in state <b>${view.state}</b>`}.</p>`;
  } else {
    results = html`<div class="scroll"><table id="operations">
<thead><tr><th>Operation</th><th>State</th><th class="num">Attempts</th><th class="num" title="proposals answered as duplicates of it: nothing sent">Duplicates</th><th>Tool</th><th>Scope</th><th>Key values</th><th>Created</th></tr></thead>
<tbody>
${view.operations.map((o) => {
  const key = keyText(o.keyValues);
  const duplicates = Object.hasOwn(view.duplicates, o.id) ? (view.duplicates[o.id] ?? 0) : 0;
  return html`<tr class="r-${o.state}" data-operation-id="${o.id}">
  <td><a class="mono id" href="${operationHref(o.id)}">${o.id}</a></td>
  <td>${stateBadge(o.state)}</td>
  <td class="num">${o.attempts.length}</td>
  <td class="num duplicates" data-duplicates="${duplicates}">${duplicates === 0 ? html`<span class="muted">0</span>` : html`<b>${duplicates}</b>`}</td>
  <td class="wrap">${o.toolId}</td>
  <td class="wrap">${o.scope.tenant} / ${o.scope.area} / ${o.scope.agent}</td>
  <td class="key wrap-any"><code title="${key}">${truncate(key, 90)}</code></td>
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
${shadowBanner(view.shadow)}
${pills}
${search}
${view.error === null ? '' : html`<p class="banner error" role="alert">${view.error}</p>`}
${keyNote}
${results}`,
  );
}

/**
 * What enforce mode would have prevented, from every decision shadow mode recorded ("12 duplicate
 * effects would have been skipped"), per verdict and then per tool.
 */
function shadowBanner(counts: readonly ShadowVerdictCount[]): SafeHtml {
  if (counts.length === 0) return html``;
  const total = (verdict: ShadowVerdict): number =>
    counts.filter((c) => c.verdict === verdict).reduce((n, c) => n + c.count, 0);
  const parts = SHADOW_VERDICTS.filter((v) => total(v) > 0).map(
    (v) => html`<li data-verdict="${v}"><b>${total(v)}</b> ${SHADOW_WORDS[v](total(v) === 1)}</li>`,
  );
  const tools = [...new Set(counts.map((c) => c.toolId))].sort();
  return html`<div class="banner note" id="shadow-summary"><p><b>Shadow mode</b>: what enforce mode would have prevented (every such request was sent anyway; each is in its operation's or run's trail):</p>
<ul>${parts}</ul>
<p class="muted wrap">tools: ${join(
    tools.map(
      (t) =>
        html`${t} (${counts
          .filter((c) => c.toolId === t)
          .map((c) => `${c.count} ${c.verdict}`)
          .join(', ')})`,
    ),
    html`; `,
  )}</p></div>`;
}

const SHADOW_WORDS: Readonly<Record<ShadowVerdict, (one: boolean) => string>> = {
  would_duplicate: (one) => `duplicate effect${one ? '' : 's'} would have been skipped`,
  would_pending: (one) => `concurrent repeat${one ? '' : 's'} would have been answered pending`,
  would_hold: (one) => `retr${one ? 'y' : 'ies'} after an unknown outcome would have waited for an approval`,
  would_halted: (one) => `proposal${one ? '' : 's'} of a looping run would have been halted`,
  would_block: (one) => `request${one ? '' : 's'} would have been blocked`,
};

/** `2025-06-01T12:00:00.123Z` → `2025-06-01 12:00:00.123Z` (the store's own instant, UTC). */
export function displayTime(at: string): string {
  return at.replace('T', ' ');
}

/**
 * Key values to search for: a JSON array (`["acme", 42]`, matched exactly), or plain
 * comma-separated text (`acme, api, Disk full` → `["acme","api","Disk full"]`, all strings).
 */
export function parseKeyQuery(text: string): unknown[] {
  if (text.startsWith('[')) {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      value = undefined;
    }
    if (!Array.isArray(value))
      throw new InputError(
        'key must be a JSON array of the key values (e.g. ["acme","api","Disk full"]) or comma-separated text (acme, api, Disk full)',
      );
    return value;
  }
  return text.split(',').map((s) => s.trim());
}

/** `GET /ui/` (`/ui/operations`) `?state=&tool=&key=&tenant=&since=&limit=`. */
export async function serveOperationsPage(
  req: IncomingMessage,
  res: ServerResponse,
  ctx: UiContext,
  query: URLSearchParams,
  csrf: string,
): Promise<void> {
  const q: OperationsQuery = {
    state: param(query, 'state'),
    tool: param(query, 'tool'),
    key: param(query, 'key'),
    tenant: param(query, 'tenant'),
    since: param(query, 'since'),
    limit: param(query, 'limit'),
  };
  let filter: ReturnType<typeof parseOperationFilter>;
  let keyValues: unknown[] | undefined;
  try {
    filter = parseOperationFilter(q);
    keyValues = q.key === undefined ? undefined : parseKeyQuery(q.key);
  } catch (err) {
    if (!(err instanceof InputError)) throw err;
    const requested = await requestedCount(ctx.store);
    const view = {
      query: q,
      state: undefined,
      operations: null,
      duplicates: {},
      counts: null,
      limit: DEFAULT_LIST_LIMIT,
      keyValues: undefined,
      error: err.message,
      csrf,
      requested,
      shadow: [],
    };
    return sendHtml(req, res, 400, renderOperationsPage(view));
  }
  const { state, limit, ...rest } = filter;
  let operations: OperationRecord[];
  let counts: Record<OperationState, number>;
  let requested: number;
  if (keyValues === undefined) {
    let partial: Partial<Record<OperationState, number>>;
    [operations, partial, requested] = await Promise.all([
      ctx.store.listOperations(filter),
      ctx.store.countOperations(rest),
      requestedCount(ctx.store),
    ]);
    counts = fullCounts(partial);
  } else {
    // The store counts without key values; a key names few operations, so count what matched.
    let all: OperationRecord[];
    [all, requested] = await Promise.all([
      ctx.store.listOperations({ ...rest, keyValues, limit: 1000 }),
      requestedCount(ctx.store),
    ]);
    counts = fullCounts({});
    for (const o of all) counts[o.state]++;
    operations = all.filter((o) => state === undefined || o.state === state).slice(0, limit);
  }
  // One grouped read for the rows shown (after the list: it needs their ids).
  const [duplicates, shadow] = await Promise.all([
    ctx.store.countDuplicates(operations.map((o) => o.id)),
    ctx.store.countShadowVerdicts(),
  ]);
  sendHtml(
    req,
    res,
    200,
    renderOperationsPage({
      query: q,
      state,
      operations,
      duplicates,
      counts,
      limit,
      keyValues,
      error: null,
      csrf,
      requested,
      shadow,
    }),
  );
}
