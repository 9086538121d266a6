/**
 * The timeline web page in a real headless Chromium (playwright-core, Debian's
 * chromium) against the admin pages on loopback and a real store (PGlite always, PostgreSQL when
 * DATABASE_URL is set): log in with the admin token, filter the operations, open one by clicking,
 * read its timeline, approve a held retry with the form, and check the approval really took effect
 * in the store. Also: readable without JavaScript, store values escaped, CSRF enforced, wrong token
 * refused. Screenshots go to test-artifacts/screenshots/.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Browser, type BrowserContext, chromium, type Locator, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handleUi } from '../../src/admin/index.js';
import type { DedupeKeyInput, Store } from '../../src/store/index.js';
import { openTestStore, storeTargets, type TestStore } from '../helpers/store.js';
import {
  expectVerdict,
  newKey,
  newRun,
  outcome,
  reconciliation,
  request,
  reserve,
  scope,
} from '../integration/store/inputs.js';

const TOKEN = 'eg-ui-7c1f0b9e4d2a48a6b3e5';
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const SCREENSHOTS = new URL('../../test-artifacts/screenshots/', import.meta.url).pathname;
const CSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'";
const XSS_KEY = ['<script>alert(1)</script>', `a"b'c&d`, '<img src=x onerror=alert(2)>'];

/** The admin pages on loopback: `handleUi`, anything else 404 (as the admin server falls through). */
async function startUi(store: Store, token: string | null): Promise<{ server: Server; base: string }> {
  const server = createServer((req, res) => {
    handleUi(req, res, { store, token }).then(
      (handled) => {
        if (!handled) res.writeHead(404, { 'content-type': 'text/plain' }).end('not a UI path');
      },
      () => res.destroy(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

function closeServer(server: Server | undefined): Promise<void> {
  if (server === undefined) return Promise.resolve();
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

async function launch(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `Chromium is not at ${CHROMIUM}: install it with "apt-get install chromium" (or set CHROMIUM_PATH).`,
    );
  }
  return chromium.launch({
    executablePath: CHROMIUM,
    timeout: 30_000,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

interface Seeded {
  /** Unknown outcome: attempt #1 not sent, retry #2 lost, a negative reconciliation, a held retry. */
  readonly held: { operationId: string; key: DedupeKeyInput; approvalId: string; attempt2: string };
  /** Succeeded on a retry the destination replayed, then skipped as a duplicate. */
  readonly dup: { operationId: string; key: DedupeKeyInput };
  readonly failed: { operationId: string };
  readonly fork: { operationId: string };
  readonly xss: { operationId: string };
  readonly twice: { operationId: string };
}

async function seed(store: Store): Promise<Seeded> {
  // Held: not sent, then a retry lost after dispatch, a lookup that found nothing, a held retry.
  const heldKey = newKey({ values: ['acme', 'app', 'Disk full on db-1'] });
  const h1 = await store.decide(reserve(newRun(), heldKey, { step: 'file-incident', worker: 'worker-7' }));
  expectVerdict(h1, 'allow');
  await store.recordOutcome(
    outcome(h1, heldKey, 'failed', {
      dispatchState: 'not_sent',
      status: null,
      responseFingerprint: null,
      error: 'connect ECONNREFUSED 140.82.112.6:443',
      durationMs: 3,
    }),
  );
  const h2 = await store.decide(reserve(newRun(), heldKey, { step: 'file-incident' }));
  expectVerdict(h2, 'allow');
  expect(h2.retryReason).toBe('connection_not_established');
  await store.recordOutcome(outcome(h2, heldKey, 'unknown', { durationMs: 30_000 }));
  const asked = await store.decide(reserve(newRun(), heldKey, { unknownRule: 'reconcile' }));
  expectVerdict(asked, 'reconcile');
  const held = await store.decide(
    reserve(newRun(), heldKey, { unknownRule: 'reconcile', reconciliation: reconciliation(asked, 'none') }),
  );
  expectVerdict(held, 'hold');

  // Duplicate: a 503, a retry the destination replayed, then another run proposes it again.
  const dupKey = newKey({ values: ['acme', 'app', 'Release 2.1 checklist'] });
  const d1 = await store.decide(reserve(newRun(), dupKey, { step: 'plan-release' }));
  expectVerdict(d1, 'allow');
  await store.recordOutcome(outcome(d1, dupKey, 'failed', { status: 503 }));
  const d2 = await store.decide(reserve(newRun(), dupKey, { step: 'plan-release' }));
  expectVerdict(d2, 'allow');
  await store.recordOutcome(outcome(d2, dupKey, 'succeeded', { replayed: true }));
  const dup = await store.decide(reserve(newRun(), dupKey, { step: 'plan-release' }));
  expectVerdict(dup, 'duplicate');

  // Failed with a 422, then a materially changed request forks a new operation (in flight).
  const failKey = newKey({ values: ['acme', 'app', 'Flaky title'] });
  const f1 = await store.decide(reserve(newRun(), failKey));
  expectVerdict(f1, 'allow');
  await store.recordOutcome(outcome(f1, failKey, 'failed'));
  const fork = await store.decide(
    reserve(newRun(), failKey, { request: { ...request, fingerprint: 'sha256:c4a11ed0' } }),
  );
  expectVerdict(fork, 'allow');
  expect(fork.supersedesOperationId).toBe(f1.operationId);

  // Hostile values from the store: key values, step, scope.
  const xssKey = newKey({ values: XSS_KEY });
  const x1 = await store.decide(
    reserve(`run-<i>x</i>`, xssKey, {
      step: '<b>bold</b>',
      scope: { ...scope, area: '<svg/onload=alert(3)>' },
    }),
  );
  expectVerdict(x1, 'allow');
  await store.recordOutcome(outcome(x1, xssKey, 'succeeded', { destinationRef: 'javascript:alert(4)' }));

  // Found twice by reconciliation: duplicate_effect_confirmed.
  const twiceKey = newKey({ values: ['acme', 'ops', 'Rotate keys'] });
  const t1 = await store.decide(reserve(newRun(), twiceKey, { unknownRule: 'reconcile' }));
  expectVerdict(t1, 'allow');
  await store.recordOutcome(outcome(t1, twiceKey, 'unknown'));
  const settled = await store.decide(
    reserve(newRun(), twiceKey, {
      unknownRule: 'reconcile',
      reconciliation: reconciliation(t1, 'multiple'),
    }),
  );
  expectVerdict(settled, 'duplicate');

  return {
    held: { operationId: h1.operationId, key: heldKey, approvalId: held.approvalId, attempt2: h2.attemptId },
    dup: { operationId: d1.operationId, key: dupKey },
    failed: { operationId: f1.operationId },
    fork: { operationId: fork.operationId },
    xss: { operationId: x1.operationId },
    twice: { operationId: t1.operationId },
  };
}

async function logIn(page: Page, base: string, token = TOKEN): Promise<void> {
  await page.goto(`${base}/ui/`);
  expect(new URL(page.url()).pathname).toBe('/ui/login');
  await page.getByLabel('Admin token').fill(token);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.waitForLoadState();
}

/** The text as rendered for a reader (layout-aware, unlike `textContent`). */
// biome-ignore lint/performance/useDomNodeTextContent: Playwright's innerText is the rendered text on purpose
const seen = (locator: Locator): Promise<string> => locator.innerText();

/** Usable at 760 px: the page itself never scrolls sideways (a table may, inside its own box). */
async function expectNoOverflowAt760(page: Page, name: string): Promise<void> {
  const before = page.viewportSize();
  await page.setViewportSize({ width: 760, height: 900 });
  try {
    const overflow = await page.evaluate(
      'document.documentElement.scrollWidth - document.documentElement.clientWidth',
    );
    expect(overflow, `${name} overflows at 760 px by ${String(overflow)} px`).toBeLessThanOrEqual(0);
    await page.screenshot({ path: name, fullPage: true });
  } finally {
    if (before !== null) await page.setViewportSize(before);
  }
}

/** The operation ids of the table rows, top to bottom. */
function rowIds(page: Page): Promise<string[]> {
  return page
    .locator('#operations tbody tr')
    .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-operation-id') ?? ''));
}

mkdirSync(SCREENSHOTS, { recursive: true });

for (const target of storeTargets()) {
  describe(`timeline page in Chromium (${target.name})`, () => {
    let store: TestStore;
    let server: Server;
    let base: string;
    let browser: Browser;
    let context: BrowserContext;
    let page: Page;
    let data: Seeded;
    const dialogs: string[] = [];
    const shot = (name: string): string => `${SCREENSHOTS}${name}-${target.kind}.png`;

    beforeAll(async () => {
      store = await openTestStore(target);
      data = await seed(store);
      ({ server, base } = await startUi(store, TOKEN));
      browser = await launch();
      context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      context.setDefaultTimeout(10_000);
      context.setDefaultNavigationTimeout(10_000);
      page = await context.newPage();
      page.on('dialog', (d) => {
        dialogs.push(d.message());
        void d.dismiss();
      });
    }, 90_000);

    afterAll(async () => {
      await browser?.close();
      await closeServer(server);
      await store?.close();
    });

    it('a wrong token stays on the login page with an error and sets no session', async () => {
      await logIn(page, base, 'not-the-token');
      expect(new URL(page.url()).pathname).toBe('/ui/login');
      await expect(page.getByRole('alert').textContent()).resolves.toContain('not the admin token');
      expect((await context.cookies()).map((c) => c.name)).not.toContain('eg_session');
      expect(await page.content()).not.toContain(TOKEN);
    });

    it('logs in with a session cookie that is not the token; pages carry the security headers', async () => {
      await logIn(page, base);
      expect(new URL(page.url()).pathname).toBe('/ui/');
      const cookie = (await context.cookies()).find((c) => c.name === 'eg_session');
      expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/ui', secure: false });
      expect(cookie?.value).not.toContain(TOKEN);
      const res = await page.goto(`${base}/ui/operations`);
      expect(res?.status()).toBe(200);
      const headers = res!.headers();
      expect(headers['content-security-policy']).toBe(CSP);
      expect(headers['x-content-type-options']).toBe('nosniff');
      expect(headers['referrer-policy']).toBe('no-referrer');
      expect(headers['cache-control']).toBe('no-store');
      expect(headers['content-type']).toBe('text/html; charset=utf-8');
    });

    it('lists the operations; the unknown filter shows exactly the unknown operation', async () => {
      await page.goto(`${base}/ui/`);
      const all = await rowIds(page);
      expect(all).toHaveLength(6);
      expect(new Set(all)).toEqual(new Set(Object.values(data).map((d) => d.operationId)));
      await expect(page.locator('a[data-state="unknown"]').textContent()).resolves.toMatch(/unknown\s*1/);
      await expect(page.locator('a[data-state="duplicate_effect_confirmed"]').textContent()).resolves.toMatch(
        /duplicate_effect_confirmed\s*1/,
      );
      // The two dangerous states are marked in the table, not only coloured.
      await expect(
        page.locator(`tr[data-operation-id="${data.twice.operationId}"] .badge`).textContent(),
      ).resolves.toBe('⚠ duplicate_effect_confirmed');
      // How many duplicates each operation absorbed: the value the gate delivers.
      const duplicatesOf = (id: string): Promise<string | null> =>
        page.locator(`tr[data-operation-id="${id}"] td.duplicates`).getAttribute('data-duplicates');
      await expect(duplicatesOf(data.dup.operationId)).resolves.toBe('1');
      await expect(duplicatesOf(data.held.operationId)).resolves.toBe('0');
      expect(await seen(page.locator('#operations thead'))).toMatch(/duplicates/i);
      await page.screenshot({ path: shot('operations-list'), fullPage: true });
      await expectNoOverflowAt760(page, shot('operations-list-760'));

      await page.locator('a[data-state="unknown"]').click();
      await page.waitForURL(/state=unknown/);
      expect(await rowIds(page)).toEqual([data.held.operationId]);
      await expect(page.locator('#operations .badge').textContent()).resolves.toBe('⚠ unknown');

      // Key values as plain comma-separated text match the JSON array exactly.
      await page.goto(`${base}/ui/`);
      await page.getByLabel('Key values').fill('acme, app, Release 2.1 checklist');
      await page.getByRole('button', { name: 'Search' }).click();
      await page.waitForURL(/key=/);
      expect(await rowIds(page)).toEqual([data.dup.operationId]);
      await page.getByLabel('Key values').fill('["acme","app"]');
      await page.getByRole('button', { name: 'Search' }).click();
      await page.waitForLoadState();
      expect(await page.locator('#operations').count()).toBe(0);
    });

    it('opens an operation by clicking: state on top, attempts with parent and reason, the observation, the approval card', async () => {
      await page.goto(`${base}/ui/operations?state=unknown`);
      await page.locator(`#operations a[href$="${data.held.operationId}"]`).click();
      await page.waitForURL(`**/ui/operations/${data.held.operationId}`);

      const hero = page.locator('section.hero');
      await expect(hero.locator('.state').textContent()).resolves.toBe('⚠ UNKNOWN');
      const heroBox = await hero.boundingBox();
      const timelineBox = await page.locator('#timeline').boundingBox();
      expect(heroBox!.y).toBeLessThan(timelineBox!.y);
      const intent = await seen(page.locator('#intent'));
      expect(intent).toContain('github.create_issue');
      expect(intent).toContain('acme / support / triage-bot');
      expect(intent).toContain('["acme","app","Disk full on db-1"]');
      expect(intent).toContain(`Idempotency-Key: ${data.held.operationId}`);
      expect(intent).toContain('step file-incident');
      expect(intent).toContain('worker worker-7');
      // The route, request, authority and fingerprint once, in the header; rows say what differs.
      expect(intent).toMatch(/route\s+POST api\.github\.com \/repos\/\{owner\}\/\{repo\}\/issues/);
      expect(intent).toContain('authority github-token-label');
      expect(intent).toContain('fingerprint sha256:0f1e2d3c');
      expect(intent).toMatch(/duplicates\s+none absorbed/);

      const attempts = page.locator('li[data-kind="attempt"]');
      expect(await attempts.count()).toBe(2);
      const first = await seen(attempts.nth(0));
      expect(first).toContain('#1');
      expect(first).toContain('not_sent');
      expect(first).toContain('not sent: connect ECONNREFUSED 140.82.112.6:443');
      expect(first).not.toContain('authority');
      expect(first).not.toContain('route');
      const second = await seen(attempts.nth(1));
      expect(second).toContain('#2');
      expect(second).toContain('sent_no_response');
      expect(second).toContain(
        'retry of #1: reason connection_not_established, decision previous_attempt_failed, 1 attempt(s) left; same request',
      );
      // Same request as #1: neither the route nor the fingerprint is repeated.
      expect(second).not.toContain('route');
      expect(second).not.toContain('fingerprint');
      expect(second).toContain('sent, no usable response: timeout');
      expect(second).toContain('(30000 ms)');
      await expect(attempts.nth(1).locator('a[href^="#attempt-"]').getAttribute('href')).resolves.toMatch(
        /^#attempt-/,
      );

      const observation = await seen(page.locator('li[data-kind="observation"]'));
      expect(observation).toContain('reconciliation: none');
      expect(observation).toContain(
        'looked up GET https://api.github.com/repos/acme/app/issues?state=all: 0 match(es)',
      );
      expect(observation).toContain('Absence proves little: the outcome stays unknown.');

      const card = page.locator(`article[data-approval-id="${data.held.approvalId}"]`);
      await expect(card.getAttribute('data-state')).resolves.toBe('requested');
      const cardText = await seen(card);
      expect(cardText).toContain('previous dispatch');
      expect(cardText).toContain('sent_no_response');
      expect(cardText).toContain('planned recovery');
      expect(cardText).toMatch(/requested\s+\S+ \S+ by decision:/);
      await page.screenshot({ path: shot('operation-held'), fullPage: true });
      await expectNoOverflowAt760(page, shot('operation-held-760'));
    });

    it('shows the duplicate decision with a link to its source, and the replay by the destination', async () => {
      await page.goto(`${base}/ui/`);
      await page.locator(`#operations a[href$="${data.dup.operationId}"]`).click();
      await page.waitForURL(`**/ui/operations/${data.dup.operationId}`);
      await expect(page.locator('section.hero .state').textContent()).resolves.toBe('SUCCEEDED');
      const decisions = page.locator('li[data-kind="decision"]');
      const duplicate = decisions.filter({ hasText: 'skipped as a duplicate of' });
      expect(await duplicate.count()).toBe(1);
      expect(await seen(duplicate)).toMatch(/decision\s+duplicate/i);
      const link = duplicate.locator('a.source-link');
      await expect(link.getAttribute('href')).resolves.toBe(`/ui/operations/${data.dup.operationId}`);
      const retry = await seen(page.locator('li[data-kind="attempt"]').nth(1));
      expect(retry).toContain('retry of #1: reason destination_5xx');
      expect(retry).toContain('replayed by the destination (it deduplicated this retry)');
      // The page counts the duplicates it absorbed, as the list does.
      await expect(page.locator('#duplicates').getAttribute('data-duplicates')).resolves.toBe('1');
      expect(await seen(page.locator('#duplicates'))).toContain('1 absorbed');
      // The destination's reference is a link out (no referrer, no opener), in the row and the header.
      const ref = page.locator('li[data-kind="attempt"]').nth(1).locator('a.ref');
      await expect(ref.getAttribute('href')).resolves.toBe('https://github.com/acme/app/issues/2');
      await expect(ref.getAttribute('rel')).resolves.toBe('noopener noreferrer');
      await expect(page.locator('#result a.ref').getAttribute('href')).resolves.toBe(
        'https://github.com/acme/app/issues/2',
      );
      await page.screenshot({ path: shot('operation-duplicate'), fullPage: true });
      await link.click();
      await page.waitForURL(`**/ui/operations/${data.dup.operationId}`);

      // A fork links both ways.
      await page.goto(`${base}/ui/operations/${data.fork.operationId}`);
      await expect(page.locator(`#intent a[href$="${data.failed.operationId}"]`).count()).resolves.toBe(1);
      await page.goto(`${base}/ui/operations/${data.failed.operationId}`);
      await expect(page.locator(`#intent a[href$="${data.fork.operationId}"]`).count()).resolves.toBe(1);
    });

    it('lists the requested approvals with their forms', async () => {
      await page.goto(`${base}/ui/approvals?state=requested`);
      const cards = page.locator('article.card');
      expect(await cards.count()).toBe(1);
      await expect(cards.first().getAttribute('data-approval-id')).resolves.toBe(data.held.approvalId);
      await expect(cards.first().getByRole('button', { name: 'Approve' }).count()).resolves.toBe(1);
      await expect(cards.first().getByRole('button', { name: 'Deny' }).count()).resolves.toBe(1);
      await page.screenshot({ path: shot('approvals'), fullPage: true });
      await expectNoOverflowAt760(page, shot('approvals-760'));
      // A crafted confirmation link for no such approval shows no banner.
      await page.goto(`${base}/ui/approvals?state=requested&decided=no-such-approval`);
      expect(await page.locator('#confirmation, [role="status"]').count()).toBe(0);
    });

    it('refuses a form without its CSRF token (403), and a POST without a session', async () => {
      const url = `${base}/ui/approvals/${data.held.approvalId}/deny`;
      const form = { by: 'mallory', reason: 'no csrf', back: '/ui/' };
      const missing = await context.request.post(url, { form, maxRedirects: 0 });
      expect(missing.status()).toBe(403);
      expect(await missing.text()).toContain('CSRF');
      const wrong = await context.request.post(url, {
        form: { ...form, csrf: 'x'.repeat(43) },
        maxRedirects: 0,
      });
      expect(wrong.status()).toBe(403);
      const anonymous = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(form).toString(),
        redirect: 'manual',
      });
      expect(anonymous.status).toBe(303);
      expect(anonymous.headers.get('location')).toBe('/ui/login');
      expect((await store.getApproval(data.held.approvalId))?.state).toBe('requested');
    });

    it('approves the held retry from the page; the next proposal is allowed as operator_approved', async () => {
      const self = `${base}/ui/operations/${data.held.operationId}`;
      const stale = await context.newPage();
      await stale.goto(self);

      await page.goto(self);
      const card = page.locator(`article[data-approval-id="${data.held.approvalId}"]`);
      await card.getByLabel('By').fill('alice@acme.test');
      await card.getByLabel('Reason').fill('checked: the issue <was not> created');
      await card.getByRole('button', { name: 'Approve' }).click();
      await page.waitForURL(
        `**/ui/operations/${data.held.operationId}?decided=${data.held.approvalId}#approval-${data.held.approvalId}`,
      );
      // The page it lands on says what was recorded.
      const confirmation = page.getByRole('status');
      expect(await seen(confirmation)).toContain(
        `Approved approval ${data.held.approvalId} by alice@acme.test`,
      );
      expect(await seen(confirmation)).toContain('Exactly one more attempt may start');
      await page.screenshot({ path: shot('approved-confirmation'), fullPage: true });
      const after = page.locator(`article[data-approval-id="${data.held.approvalId}"]`);
      await expect(after.getAttribute('data-state')).resolves.toBe('approved');
      expect(await seen(after.locator('.decided'))).toContain('alice@acme.test');
      expect(await seen(after.locator('.decided'))).toContain('checked: the issue <was not> created');
      await expect(after.getByRole('button', { name: 'Revoke' }).count()).resolves.toBe(1);
      expect(await seen(page.locator('li[data-kind="approval"]').last())).toContain(
        'approved by alice@acme.test',
      );

      const retry = await store.decide(reserve(newRun(), data.held.key, { unknownRule: 'hold' }));
      expectVerdict(retry, 'allow');
      expect(retry).toMatchObject({
        operationId: data.held.operationId,
        attemptNumber: 3,
        retryOfAttemptId: data.held.attempt2,
        retryDecision: 'operator_approved',
      });

      // The stale page still shows the form: the store refuses, the page says why (409).
      const card2 = stale.locator(`article[data-approval-id="${data.held.approvalId}"]`);
      await card2.getByLabel('By').fill('bob@acme.test');
      await card2.getByLabel('Reason').fill('me too');
      const [response] = await Promise.all([
        stale.waitForResponse((r) => r.request().method() === 'POST'),
        card2.getByRole('button', { name: 'Approve' }).click(),
      ]);
      expect(response.status()).toBe(409);
      await stale.waitForLoadState();
      const message = await seen(stale.locator('#error-message'));
      expect(message).toMatch(/approv/i);
      expect(await stale.content()).not.toMatch(/\bat (async )?\w+ \(|node:internal|\.ts:\d+/);
      await stale.getByRole('link', { name: 'Back' }).click();
      // Back from a refusal: no confirmation, nothing was recorded by this form.
      await stale.waitForURL(`**/ui/operations/${data.held.operationId}#approval-${data.held.approvalId}`);
      expect(await stale.getByRole('status').count()).toBe(0);
      await expect(
        stale.locator(`article[data-approval-id="${data.held.approvalId}"]`).getAttribute('data-state'),
      ).resolves.toBe('used');
      expect(await seen(stale.locator('li[data-kind="attempt"]').last())).toContain(
        'decision operator_approved',
      );
      await stale.close();
      expect(dialogs).toEqual([]);
    });

    it('resolves an unknown operation from its page: the operator decision is in the timeline and the key is confirmed', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key, { unknownRule: 'hold' }));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'unknown'));
      const self = `${base}/ui/operations/${first.operationId}`;
      await page.goto(self);
      const form = page.locator('#resolve form');
      await form.getByLabel('Found').selectOption('succeeded');
      await form.getByLabel('By').fill('carol@acme.test');
      await form.getByLabel('Reason').fill('the issue <is> there, created 10:02');
      await form.getByLabel('Reference(s)').fill('https://github.com/acme/app/issues/77');
      await form.getByRole('button', { name: 'Resolve' }).click();
      await page.waitForURL(`**/ui/operations/${first.operationId}?resolved=*#observation-*`);
      const resolved = await seen(page.getByRole('status'));
      expect(resolved).toContain('Resolved as succeeded by carol@acme.test');
      await page.screenshot({ path: shot('resolved-confirmation'), fullPage: true });
      await expect(page.locator('section.hero').getAttribute('data-state')).resolves.toBe('succeeded');
      expect(await page.locator('#resolve').count()).toBe(0);
      const entry = await seen(page.locator('li[data-kind="observation"]').last());
      expect(entry).toContain('operator_decision');
      expect(entry).toContain('carol@acme.test');
      expect(entry).toContain('the issue <is> there, created 10:02');
      expect(entry).toContain('Settled the operation as succeeded (it was unknown)');
      const link = page.locator('li[data-kind="observation"]').last().locator('a.ref');
      await expect(link.getAttribute('href')).resolves.toBe('https://github.com/acme/app/issues/77');
      await expect(link.getAttribute('rel')).resolves.toBe('noopener noreferrer');
      // A crafted link naming an observation of another operation (or none) confirms nothing.
      const observationId = new URL(page.url()).searchParams.get('resolved');
      await page.goto(`${base}/ui/operations/${data.dup.operationId}?resolved=${observationId}`);
      expect(await page.getByRole('status').count()).toBe(0);
      await page.goto(`${base}/ui/operations/${first.operationId}?decided=${data.held.approvalId}`);
      expect(await page.getByRole('status').count()).toBe(0);

      const repeat = await store.decide(reserve(newRun(), key, { unknownRule: 'hold' }));
      expectVerdict(repeat, 'duplicate');
      expect(repeat.source?.destinationRef).toBe('https://github.com/acme/app/issues/77');
      expect(dialogs).toEqual([]);
    });

    it('shows a halted run, links to it from its decisions, and releases it from its page with a confirmation', async () => {
      const key = newKey({ values: ['acme', 'app', 'Looping issue'] });
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'succeeded'));
      const run = `looper-${newRun()}`;
      expectVerdict(await store.decide(reserve(run, key, { maxDuplicateSkips: 1 })), 'duplicate');
      const halted = await store.decide(reserve(run, key, { maxDuplicateSkips: 1 }));
      expectVerdict(halted, 'halted');

      await page.goto(`${base}/ui/runs?halted=true`);
      await expectNoOverflowAt760(page, shot('runs-760'));
      const row = page.locator(`#runs tr[data-run-id="${run}"]`);
      await expect(seen(row)).resolves.toContain('halted');
      await row.getByRole('link', { name: run }).click();
      await page.waitForLoadState();
      expect(new URL(page.url()).pathname).toBe(`/ui/runs/${run}`);
      const card = page.locator('article.card[data-state="halted"]');
      await expect(seen(card)).resolves.toContain(halted.decisionId);
      // Every decision of the run, the halt among them, each linked to its operation.
      const verdicts = await page
        .locator('#decisions tbody tr')
        .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-verdict')));
      expect(verdicts.sort()).toEqual(['duplicate', 'halted']);
      await expect(
        page.locator(`#decisions a[href="/ui/operations/${first.operationId}"]`).count(),
      ).resolves.toBe(2);
      await page.setViewportSize({ width: 760, height: 900 });
      const overflow = await page.evaluate(
        'document.documentElement.scrollWidth - document.documentElement.clientWidth',
      );
      expect(overflow).toBeLessThanOrEqual(0);
      await page.screenshot({ path: shot('run-halted'), fullPage: true });
      await page.setViewportSize({ width: 1280, height: 900 });

      await card.getByLabel('By').fill('oncall@acme');
      await card.getByLabel('Reason').fill('prompt fixed');
      await card.getByRole('button', { name: 'Release' }).click();
      await page.waitForLoadState();
      await expect(seen(page.locator('#confirmation'))).resolves.toContain('Released');
      await expect(page.locator('article.card[data-state="running"]').count()).resolves.toBe(1);
      await page.screenshot({ path: shot('run-released'), fullPage: true });
      const [record] = await store.listRuns({ runId: run });
      expect(record).toMatchObject({
        haltedAt: null,
        releases: [{ releasedBy: 'oncall@acme', reason: 'prompt fixed' }],
      });
      // The operation page links the decision's run to this page.
      await page.goto(`${base}/ui/operations/${first.operationId}`);
      await expect(page.locator(`a[href="/ui/runs/${run}"]`).count()).resolves.toBeGreaterThan(0);
    });

    it('reads without JavaScript and escapes every store value', async () => {
      const noJs = await browser.newContext({
        javaScriptEnabled: false,
        viewport: { width: 1280, height: 900 },
      });
      noJs.setDefaultTimeout(10_000);
      try {
        const p = await noJs.newPage();
        await logIn(p, base);
        expect(new URL(p.url()).pathname).toBe('/ui/');
        const res = await p.goto(`${base}/ui/operations/${data.xss.operationId}`);
        const raw = await res!.text();
        expect(raw).not.toContain('<script');
        expect(raw).not.toContain('<img src=x');
        expect(raw).not.toContain('<svg/onload');
        expect(raw).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
        await expect(p.locator('#key-values').textContent()).resolves.toBe(JSON.stringify(XSS_KEY));
        expect(await p.locator('script, img, svg').count()).toBe(0);
        expect(await seen(p.locator('section.hero .state'))).toBe('SUCCEEDED');
        expect(await seen(p.locator('#intent'))).toContain('<svg/onload=alert(3)>');
        expect(await seen(p.locator('li[data-kind="attempt"]'))).toContain('ref javascript:alert(4)');
        expect(await p.locator('a[href^="javascript:"]').count()).toBe(0);
        // Its result reference is not an http(s) URL: shown as text, never a link.
        expect(await seen(p.locator('#result'))).toContain('javascript:alert(4)');
        expect(await p.locator('#result a, li[data-kind="attempt"] a.ref').count()).toBe(0);
        // The held operation's timeline and its approval card read as well without a script.
        await p.goto(`${base}/ui/operations/${data.held.operationId}`);
        expect(await p.locator('ol.timeline > li').count()).toBeGreaterThanOrEqual(8);
        // Approved and retried: attempt #3 is in flight.
        expect(await seen(p.locator('section.hero .state'))).toBe('OPEN');
      } finally {
        await noJs.close();
      }
    });

    it('logs out: the session ends on the server too', async () => {
      const before = (await context.cookies()).find((c) => c.name === 'eg_session')!.value;
      await page.goto(`${base}/ui/`);
      await page.getByRole('button', { name: 'Log out' }).click();
      await page.waitForURL('**/ui/login');
      expect((await context.cookies()).map((c) => c.name)).not.toContain('eg_session');
      const replay = await fetch(`${base}/ui/operations`, {
        headers: { cookie: `eg_session=${before}` },
        redirect: 'manual',
      });
      expect(replay.status).toBe(303);
      expect(replay.headers.get('location')).toMatch(/^\/ui\/login/);
    });

    it('accepts the bearer token; without a configured token the login page says how to set one', async () => {
      const bearer = await fetch(`${base}/ui/operations`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(bearer.status).toBe(200);
      expect(await bearer.text()).toContain(data.held.operationId);

      const off = await startUi(store, null);
      try {
        const p = await context.newPage();
        await p.goto(`${off.base}/ui/operations/${data.held.operationId}`);
        expect(new URL(p.url()).pathname).toBe('/ui/login');
        const text = await seen(p.locator('main'));
        expect(text).toContain('EFFECTGATE_ADMIN_TOKEN');
        expect(text).not.toContain(data.held.operationId);
        await p.close();
      } finally {
        await closeServer(off.server);
      }
    });
  });
}
