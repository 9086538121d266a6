/**
 * What the pages add for an operator: destination references as safe links, the
 * duplicate count per listed operation, and the confirmation after a form (only for a record that
 * really is one, worded from the record), and which request an approval card lets go.
 */
import { describe, expect, it } from 'vitest';
import { renderApprovalCard } from '../../../../src/admin/ui/approvals-page.js';
import {
  approvalConfirmation,
  resolutionConfirmation,
  withConfirmation,
} from '../../../../src/admin/ui/confirmation.js';
import { httpUrl, refHtml } from '../../../../src/admin/ui/links.js';
import { renderOperationsPage } from '../../../../src/admin/ui/operations-page.js';
import { approvalCard } from '../../../../src/cli/approvals-command.js';
import type { ApprovalRecord, ObservationRecord, OperationRecord } from '../../../../src/store/index.js';

describe('destination references as links', () => {
  it.each([
    ['https://github.com/acme/app/issues/77', 'https://github.com/acme/app/issues/77'],
    ['http://tracker.local:9090/issues/1?x=1#c2', 'http://tracker.local:9090/issues/1?x=1#c2'],
    ['HTTPS://Example.com/a b'.replace(' ', '%20'), 'https://example.com/a%20b'],
    ['https://example.com/"><script>', 'https://example.com/%22%3E%3Cscript%3E'],
  ])('links %s', (ref, href) => {
    expect(httpUrl(ref)).toBe(href);
  });

  it.each([
    'javascript:alert(1)',
    'JavaScript:alert(1)',
    ' javascript:alert(1)',
    'data:text/html,<script>alert(1)</script>',
    'vbscript:msgbox(1)',
    'file:///etc/passwd',
    'ftp://example.com/x',
    '//evil.example/x',
    'https:evil.example',
    'https:///x',
    ' https://example.com/',
    'https://example.com/ x',
    'https://exa\tmple.com/',
    'https://\\evil.example',
    'refund_01HZX',
    '',
  ])('keeps %j as text', (ref) => {
    expect(httpUrl(ref)).toBeNull();
    expect(refHtml(ref).text).not.toContain('<a');
  });

  it('escapes the shown text and the href, and never sends a referrer or an opener', () => {
    const link = refHtml("https://example.com/?q=<b>'&").text;
    expect(link).toBe(
      '<a class="ref mono" href="https://example.com/?q=%3Cb%3E%27&amp;" rel="noopener noreferrer">https://example.com/?q=&lt;b&gt;&#39;&amp;</a>',
    );
    expect(refHtml('javascript:alert(4)').text).toBe('<code>javascript:alert(4)</code>');
    expect(refHtml(null).text).toBe('<code>null</code>');
  });
});

const operation = (id: string): OperationRecord => ({
  id,
  toolId: 'github.create_issue',
  scope: { tenant: 'acme', area: 'support', agent: 'bot' },
  state: 'succeeded',
  keyHash: null,
  keyValues: ['acme'],
  idempotencyHeader: null,
  runId: 'run-1',
  step: null,
  worker: null,
  agentVersion: null,
  supersedesOperationId: null,
  createdAt: '2025-06-01T12:00:00.000Z',
  updatedAt: '2025-06-01T12:00:00.000Z',
  attempts: [],
});

describe('the operations list', () => {
  it('says what shadow mode would have prevented, per verdict and per tool', () => {
    const page = renderOperationsPage({
      query: {},
      state: undefined,
      operations: [],
      duplicates: {},
      counts: null,
      limit: 100,
      keyValues: undefined,
      error: null,
      csrf: 'c',
      requested: 0,
      shadow: [
        { toolId: 'stripe.refund', verdict: 'would_duplicate', count: 9 },
        { toolId: 'github.create_issue', verdict: 'would_duplicate', count: 3 },
        { toolId: 'github.create_issue', verdict: 'would_hold', count: 1 },
      ],
    }).text;
    expect(page).toContain('id="shadow-summary"');
    expect(page).toMatch(
      /<li data-verdict="would_duplicate"><b>12<\/b> duplicate effects would have been skipped<\/li>/,
    );
    expect(page).toMatch(/<b>1<\/b> retry after an unknown outcome would have waited for an approval/);
    expect(page).toContain('stripe.refund (9 would_duplicate)');
    expect(page).not.toContain('would_pending');
  });

  it('shows how many duplicates each operation absorbed, 0 when the store names none', () => {
    const page = renderOperationsPage({
      query: {},
      state: undefined,
      operations: [operation('op-a'), operation('op-b'), operation('__proto__')],
      duplicates: Object.fromEntries([['op-a', 3]]),
      counts: null,
      limit: 100,
      keyValues: undefined,
      error: null,
      csrf: 'c',
      requested: 0,
      shadow: [],
    }).text;
    expect(page).toContain('<th class="num" title="proposals answered as duplicates of it: nothing sent">');
    // No shadow decisions: no shadow banner.
    expect(page).not.toContain('id="shadow-summary"');
    const cell = (id: string): string | undefined =>
      new RegExp(`data-operation-id="${id}"[\\s\\S]*?data-duplicates="(\\d+)"`).exec(page)?.[1];
    expect(cell('op-a')).toBe('3');
    expect(cell('op-b')).toBe('0');
    expect(cell('__proto__')).toBe('0');
  });
});

const approval = (over: Partial<ApprovalRecord>): ApprovalRecord => ({
  id: 'ap-1',
  operationId: 'op-a',
  state: 'requested',
  intent: {
    toolId: 't',
    scope: { tenant: 'a', area: 'b', agent: 'c' },
    keyValues: null,
    method: 'POST',
    host: 'h',
    path: '/p',
    route: 'POST h /p',
    fingerprint: 'sha256:x',
    requestFingerprint: 'sha256:x',
    idempotencyHeader: null,
  },
  previousAttemptId: null,
  previousDispatchState: null,
  previousStatus: null,
  plannedRecovery: 'one retry',
  requestedAt: '2025-06-01T12:00:00.000Z',
  requestedBy: 'decision:d',
  decidedBy: null,
  decidedAt: null,
  reason: null,
  expiresAt: null,
  revokedBy: null,
  revokedAt: null,
  usedByAttemptId: null,
  usedAt: null,
  grantId: null,
  ...over,
});

describe('an approval card names the request it lets go (its fingerprint)', () => {
  const cards = (a: ApprovalRecord): [string, string] => [
    renderApprovalCard(a, { csrf: 'c', back: '/ui/approvals', showOperation: true }).text,
    approvalCard(a).join('\n'),
  ];

  it('the same request as the lost attempt', () => {
    for (const text of cards(approval({}))) {
      expect(text).toContain('the same request');
      expect(text).not.toContain('CHANGED');
    }
  });

  it('a changed request: CHANGED, with both fingerprints', () => {
    const changed = approval({
      intent: { ...approval({}).intent, requestFingerprint: 'sha256:payee-mallory' },
    });
    for (const text of cards(changed)) {
      expect(text).toContain('CHANGED');
      expect(text).toContain('sha256:payee-mallory');
      expect(text).toContain('sha256:x');
    }
  });

  it('a card recorded before migration 0011 for a change whose request is unknown lets nothing go', () => {
    const legacy = approval({ intent: { ...approval({}).intent, requestFingerprint: null } });
    for (const text of cards(legacy)) expect(text).toContain('lets no request go');
  });
});

describe('confirmations', () => {
  it('sets the confirmation parameter, keeping the query and the fragment, replacing an earlier one', () => {
    expect(withConfirmation('/ui/operations/op-a#approval-ap-1', 'decided', 'ap-1')).toBe(
      '/ui/operations/op-a?decided=ap-1#approval-ap-1',
    );
    expect(withConfirmation('/ui/approvals?state=requested&decided=old', 'decided', 'a b&c')).toBe(
      '/ui/approvals?state=requested&decided=a+b%26c',
    );
  });

  it('says what was decided, from the record; nothing for an undecided card', () => {
    expect(approvalConfirmation(approval({}), '#approval-ap-1')).toBeNull();
    expect(approvalConfirmation(approval({ state: 'withdrawn', decidedAt: null }), '#x')).toBeNull();
    const decided = { decidedBy: 'alice', decidedAt: '2025-06-01T12:01:00.000Z', reason: 'checked <b>' };
    const approved = approvalConfirmation(
      approval({ ...decided, state: 'approved' }),
      '#approval-ap-1',
    )!.text;
    expect(approved).toContain('role="status"');
    expect(approved).toContain(
      '<b>Approved</b> approval <a href="#approval-ap-1" class="mono">ap-1</a> by alice',
    );
    expect(approved).toContain('checked &lt;b&gt;');
    expect(approvalConfirmation(approval({ ...decided, state: 'denied' }), '#x')!.text).toContain(
      '<b>Denied</b>',
    );
    const revoked = approval({
      ...decided,
      state: 'revoked',
      revokedBy: 'bob',
      revokedAt: '2025-06-01T12:02:00.000Z',
    });
    expect(approvalConfirmation(revoked, '#x')!.text).toContain('<b>Revoked</b> approval');
    expect(approvalConfirmation(revoked, '#x')!.text).toContain('by bob');
  });

  it('says how a resolution was recorded; nothing for evidence nobody submitted', () => {
    const observation = (result: string, facts: Record<string, unknown>): ObservationRecord => ({
      id: 'ob-1',
      operationId: 'op-a',
      attemptId: null,
      kind: 'operator_decision',
      result,
      facts,
      decisionId: null,
      createdAt: '2025-06-01T12:00:00.000Z',
    });
    expect(resolutionConfirmation(observation('succeeded', { by: 'carol' }))!.text).toContain(
      '<b>Resolved</b> as <b>succeeded</b> by carol',
    );
    expect(
      resolutionConfirmation(observation('not_settled', { by: 'carol', stateAtObservation: 'failed' }))!.text,
    ).toContain('already failed');
    expect(resolutionConfirmation(observation('none', { matches: 0 }))).toBeNull();
  });
});
