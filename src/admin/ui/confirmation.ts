/**
 * What the page a form lands on says was recorded: after Approve / Deny /
 * Revoke and Resolve the redirect names the record (`?decided=<approval id>`,
 * `?resolved=<observation id>`, like the run page's `?released=`), and the page shows a
 * `role="status"` banner read from that record. Only a record the page really has gets one, and
 * its words come from the store, not the link: a crafted link shows nothing, or the truth.
 */
import type { ApprovalRecord, ObservationRecord } from '../../store/index.js';
import { html, type SafeHtml } from './html.js';
import { displayTime } from './operations-page.js';

/** `path` (a same-origin `/ui/…` path, perhaps with a query and a fragment) with `name=value` set. */
export function withConfirmation(path: string, name: string, value: string): string {
  const url = new URL(path, 'http://ui.invalid');
  url.searchParams.set(name, value);
  return `${url.pathname}${url.search}${url.hash}`;
}

/** The query names a confirmation is carried in (here, and the run page's `released`). */
const CONFIRMATIONS = ['decided', 'resolved', 'released'] as const;

/**
 * `path` without any confirmation: where a form comes back to, or an error page's Back link, must
 * not confirm an earlier action again after this one failed.
 */
export function withoutConfirmation(path: string): string {
  const url = new URL(path, 'http://ui.invalid');
  for (const name of CONFIRMATIONS) url.searchParams.delete(name);
  return `${url.pathname}${url.search}${url.hash}`;
}

function banner(body: SafeHtml): SafeHtml {
  return html`<p class="banner ok" role="status" id="confirmation">${body}</p>`;
}

/** The banner for an approval just decided (`card`: where its card is), `null` when it carries no decision. */
export function approvalConfirmation(a: ApprovalRecord, card: string): SafeHtml | null {
  const reason = a.reason ? html`: ${a.reason}` : '';
  const link = html`<a href="${card}" class="mono">${a.id}</a>`;
  if (a.revokedAt !== null) {
    return banner(
      html`<b>Revoked</b> approval ${link} by ${a.revokedBy ?? '?'}${reason}. The retry it allowed may no longer start.`,
    );
  }
  if (a.decidedAt === null) return null;
  if (a.state === 'denied') {
    return banner(
      html`<b>Denied</b> approval ${link} by ${a.decidedBy ?? '?'}${reason}. No retry is sent on its account.`,
    );
  }
  if (a.state === 'withdrawn') return null;
  // The words say what the card is now, not what the link claims was just done: a stale or
  // crafted `?decided=` on a card whose retry already ran, or that expired, must not read as a
  // pending permission.
  if (a.state === 'used') {
    return banner(
      html`Approval ${link} (approved by ${a.decidedBy ?? '?'}${reason}) is <b>used</b>: the one retry it allowed has started${a.usedByAttemptId === null ? '' : html` (attempt <code>${a.usedByAttemptId}</code>)`}.`,
    );
  }
  if (a.state === 'expired') {
    return banner(
      html`Approval ${link} (approved by ${a.decidedBy ?? '?'}${reason}) has <b>expired</b> unused: no retry may start on its account.`,
    );
  }
  if (a.state !== 'approved') return null;
  const until =
    a.expiresAt === null
      ? ''
      : html` It may start until <time datetime="${a.expiresAt}">${displayTime(a.expiresAt)}</time>.`;
  return banner(
    html`<b>Approved</b> approval ${link} by ${a.decidedBy ?? '?'}${reason}. Exactly one more attempt may start.${until}`,
  );
}

/** The banner for an observation just recorded from the Resolve form (or posted as evidence). */
export function resolutionConfirmation(o: ObservationRecord): SafeHtml | null {
  const f = o.facts as Record<string, unknown>;
  if (f['by'] === undefined) return null; // a lookup or a restart: nobody submitted it
  const entry = html`<a href="#observation-${o.id}">in the timeline</a>`;
  const by = String(f['by']);
  const what =
    o.result === 'noted'
      ? html`<b>Noted</b> by ${by}: recorded as evidence, the state did not change`
      : o.result === 'not_settled'
        ? html`<b>Recorded</b> by ${by}, but the operation was already ${String(f['stateAtObservation'] ?? '?')}: kept as evidence, nothing changed`
        : html`<b>Resolved</b> as <b>${o.result}</b> by ${by}`;
  return banner(html`${what} (${entry}).`);
}
