/**
 * Agent-supplied text on the admin pages, parsed by a real browser (headless Chromium): every field
 * an agent or a destination controls (key values, run/step/worker names, agent version, scope, tool,
 * request, destination references, lookup and outcome errors, observation and operator notes…) is
 * recorded through the real store holding markup that closes a <textarea>, <title> or <style>,
 * leaves a quoted attribute and opens elements. Every page that shows a field must show it as
 * text: no injected element or attribute exists, the page's own fields are intact, and the text
 * is there to read.
 */
import { existsSync } from 'node:fs';
import { type Browser, type BrowserContext, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AdminServer, createAdminServer } from '../../src/admin/index.js';
import { csrfToken } from '../../src/admin/ui/session.js';
import type { DedupeKeyInput, Scope, Store } from '../../src/store/index.js';
import { openTestStore, storeTargets, type TestStore } from '../helpers/store.js';
import {
  block,
  expectVerdict,
  newKey,
  outcome,
  reconciliation,
  request,
  reserve,
} from '../integration/store/inputs.js';

const TOKEN = 'eg-hostile-text-token-4e7a91c2';
const CSRF = csrfToken(TOKEN, 'bearer');
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';

/**
 * `field`'s hostile value: it closes every element whose text is raw (`textarea`, `title`) or
 * unparsed (`style`), leaves a double- or single-quoted attribute, and opens elements carrying
 * `data-pwn`. Shown as text, it reads `pw-<field></textarea>…`.
 */
const pw = (field: string): string =>
  `pw-${field}</textarea></title></style><b data-pwn=${field}>x</b>"' data-pwn-attr=${field} '><i data-pwn=${field}>`;
/** What a page shows of `pw(field)` when it shows it as text (up to the first quote). */
const shown = (field: string): string => `pw-${field}</textarea></title></style><b data-pwn=${field}>x</b>`;

const hostileScope: Scope = { tenant: pw('tenant'), area: pw('area'), agent: pw('agent') };

/** Every field recorded below, each of which some page must show as text. */
const FIELDS = [
  'run',
  'step',
  'worker',
  'agent-version',
  'tenant',
  'area',
  'agent',
  'tool',
  'explain',
  'host',
  'path',
  'route',
  'fingerprint',
  'authority',
  'key',
  'outcome-error',
  'response-fingerprint',
  'destination-ref',
  'lookup-endpoint',
  'lookup-error',
  'lookup-ref',
  'approver',
  'approve-reason',
  'denier',
  'deny-reason',
  'note-by',
  'note-reason',
  'note-ref',
  'payload',
  'resolver',
  'resolve-reason',
  'resolve-ref',
  'block-reason',
  'loop-run',
  'releaser',
  'release-reason',
  'shadow-tool',
  'search-key',
  'search-since',
  'missing-operation',
  'missing-run',
] as const;

interface Seeded {
  /** Pages (paths under the admin server) that show the seeded records. */
  readonly pages: readonly string[];
  /** Forms posted with hostile values the error page they get back repeats. */
  readonly posts: readonly { readonly path: string; readonly form: Record<string, string> }[];
}

/** A short hostile value (an error message shows at most 60 characters of a value). */
const short = (field: string): string => `</textarea><b data-pwn=${field}>`;

/** The hostile records, made through the store the gate uses, and the pages that show them. */
async function seed(store: Store): Promise<Seeded> {
  const run = pw('run');
  const common = {
    step: pw('step'),
    worker: pw('worker'),
    agentVersion: pw('agent-version'),
    scope: hostileScope,
    toolId: pw('tool'),
    explain: pw('explain'),
    request: {
      ...request,
      host: pw('host'),
      path: `/issues/${pw('path')}`,
      route: pw('route'),
      fingerprint: pw('fingerprint'),
      authorityRef: pw('authority'),
    },
  } as const;
  const key = (): DedupeKeyInput => newKey({ values: [pw('key'), 7] });

  // Unknown, a lookup that found nothing, a held retry approved, then the retry succeeds with a
  // hostile reference; an operator's note on top.
  const heldKey = key();
  const a1 = await store.decide(reserve(run, heldKey, common));
  expectVerdict(a1, 'allow');
  await store.recordOutcome(outcome(a1, heldKey, 'unknown', { error: pw('outcome-error') }));
  const asked = await store.decide(reserve(run, heldKey, { ...common, unknownRule: 'reconcile' }));
  expectVerdict(asked, 'reconcile');
  const held = await store.decide(
    reserve(run, heldKey, {
      ...common,
      unknownRule: 'reconcile',
      reconciliation: reconciliation(asked, 'inconclusive', {
        endpoint: pw('lookup-endpoint'),
        error: pw('lookup-error'),
      }),
    }),
  );
  expectVerdict(held, 'hold');
  await store.decideApproval({
    approvalId: held.approvalId,
    action: 'approve',
    by: pw('approver'),
    reason: pw('approve-reason'),
    ttlMs: 3_600_000,
  });
  const retry = await store.decide(reserve(run, heldKey, common));
  expectVerdict(retry, 'allow');
  await store.recordOutcome(
    outcome(retry, heldKey, 'succeeded', {
      destinationRef: `https://tracker.example/issues/${pw('destination-ref')}`,
      responseFingerprint: pw('response-fingerprint'),
    }),
  );
  const note = await store.addObservation({
    operationId: a1.operationId,
    kind: 'operator_note',
    by: pw('note-by'),
    reason: pw('note-reason'),
    settles: null,
    status: null,
    destinationRef: null,
    refs: [pw('note-ref')],
    payloadFingerprint: pw('payload'),
    source: 'api',
  });

  // Unknown, settled by an operator's decision naming a hostile reference.
  const resolvedKey = key();
  const r1 = await store.decide(reserve(run, resolvedKey, common));
  expectVerdict(r1, 'allow');
  await store.recordOutcome(outcome(r1, resolvedKey, 'unknown'));
  const resolved = await store.addObservation({
    operationId: r1.operationId,
    kind: 'operator_decision',
    by: pw('resolver'),
    reason: pw('resolve-reason'),
    settles: 'succeeded',
    status: null,
    destinationRef: pw('resolve-ref'),
    refs: [],
    payloadFingerprint: null,
    source: 'page',
  });

  // Unknown, a lookup that matched a hostile reference… then a held retry of another one, denied.
  const matchedKey = key();
  const m1 = await store.decide(reserve(run, matchedKey, { ...common, unknownRule: 'reconcile' }));
  expectVerdict(m1, 'allow');
  await store.recordOutcome(outcome(m1, matchedKey, 'unknown'));
  const matched = await store.decide(
    reserve(run, matchedKey, {
      ...common,
      unknownRule: 'reconcile',
      reconciliation: reconciliation(m1, 'match', { remoteRefs: [pw('lookup-ref')] }),
    }),
  );
  expectVerdict(matched, 'duplicate');
  const deniedKey = key();
  const n1 = await store.decide(reserve(run, deniedKey, common));
  expectVerdict(n1, 'allow');
  await store.recordOutcome(outcome(n1, deniedKey, 'unknown'));
  const deniedHold = await store.decide(reserve(run, deniedKey, common));
  expectVerdict(deniedHold, 'hold');
  await store.decideApproval({
    approvalId: deniedHold.approvalId,
    action: 'deny',
    by: pw('denier'),
    reason: pw('deny-reason'),
  });

  // A held retry nobody decided yet: its card carries the Approve / Deny form.
  const waitingKey = key();
  const w1 = await store.decide(reserve(run, waitingKey, common));
  expectVerdict(w1, 'allow');
  await store.recordOutcome(outcome(w1, waitingKey, 'unknown'));
  expectVerdict(await store.decide(reserve(run, waitingKey, common)), 'hold');

  // A blocked proposal, and a run that loops on a done key until halted, then is released.
  expectVerdict(await store.decide(block(run, pw('block-reason'), common)), 'block');
  const doneKey = key();
  const d1 = await store.decide(reserve(run, doneKey, common));
  expectVerdict(d1, 'allow');
  await store.recordOutcome(outcome(d1, doneKey, 'succeeded'));
  const loopRun = pw('loop-run');
  let halted = false;
  for (let i = 0; i < 5 && !halted; i++) {
    const d = await store.decide(reserve(loopRun, doneKey, { ...common, maxDuplicateSkips: 2 }));
    halted = d.verdict === 'halted';
  }
  expect(halted).toBe(true);
  const released = await store.releaseRun({
    runId: loopRun,
    scope: hostileScope,
    by: pw('releaser'),
    reason: pw('release-reason'),
  });
  // Halted again: its card shows the release and a Release form with the hostile scope.
  expect((await store.decide(reserve(loopRun, doneKey, { ...common, maxDuplicateSkips: 1 }))).verdict).toBe(
    'duplicate',
  );
  const again = await store.decide(reserve(loopRun, doneKey, { ...common, maxDuplicateSkips: 1 }));
  expectVerdict(again, 'halted');

  // Shadow mode: a repeat recorded as would_duplicate under a hostile tool id.
  const shadowKey = newKey();
  const s1 = await store.decide(reserve(run, shadowKey, { toolId: pw('shadow-tool'), mode: 'shadow' }));
  expectVerdict(s1, 'allow');
  await store.recordOutcome(outcome(s1, shadowKey, 'succeeded'));
  await store.decide(reserve(run, shadowKey, { toolId: pw('shadow-tool'), mode: 'shadow' }));
  expect(await store.countShadowVerdicts()).toContainEqual(
    expect.objectContaining({ toolId: pw('shadow-tool'), verdict: 'would_duplicate' }),
  );

  const op = (id: string): string => `/ui/operations/${encodeURIComponent(id)}`;
  const q = (params: Record<string, string>): string => new URLSearchParams(params).toString();
  const releasedId = released.releases.at(-1)!.id;
  return {
    pages: [
      '/ui/operations',
      `/ui/operations?${q({ tool: pw('search-tool'), key: pw('search-key') })}`,
      `/ui/operations?${q({ key: `["${pw('search-key').replaceAll('"', '\\"')}"]` })}`,
      `/ui/operations?${q({ since: pw('search-since') })}`,
      op(a1.operationId),
      `${op(a1.operationId)}?${q({ decided: held.approvalId })}`,
      `${op(a1.operationId)}?${q({ resolved: note.observationId })}`,
      op(r1.operationId),
      `${op(r1.operationId)}?${q({ resolved: resolved.observationId })}`,
      op(m1.operationId),
      op(n1.operationId),
      `${op(n1.operationId)}?${q({ decided: deniedHold.approvalId })}`,
      op(d1.operationId),
      op(s1.operationId),
      op(pw('missing-operation')),
      '/ui/approvals?state=all',
      '/ui/approvals?state=requested',
      op(w1.operationId),
      `/ui/approvals?${q({ state: 'all', decided: held.approvalId })}`,
      `/ui/approvals?${q({ state: 'all', decided: deniedHold.approvalId })}`,
      '/ui/runs',
      `/ui/runs/${encodeURIComponent(run)}`,
      `/ui/runs/${encodeURIComponent(loopRun)}`,
      `/ui/runs/${encodeURIComponent(loopRun)}?${q({ released: releasedId })}`,
      `/ui/runs/${encodeURIComponent(pw('missing-run'))}`,
    ],
    posts: [
      {
        path: `${op(n1.operationId)}/resolve`,
        form: { csrf: CSRF, as: short('resolve-as'), by: 'alice', reason: 'checked' },
      },
      {
        path: `/ui/approvals/${encodeURIComponent(held.approvalId)}/approve`,
        form: { csrf: CSRF, by: 'alice', reason: 'ok', ttl: short('ttl'), back: '/ui/approvals' },
      },
    ],
  };
}

/** What the browser parsed of one page. */
interface Parsed {
  readonly status: number;
  /** Elements or attributes the hostile text opened (must be none). */
  readonly injected: readonly string[];
  readonly title: string;
  readonly styles: number;
  /** The page's own textareas, by name, with what they hold. */
  readonly textareas: readonly { readonly name: string; readonly value: string }[];
  /** The forms' inputs, by name, with their values. */
  readonly inputs: readonly { readonly name: string; readonly value: string }[];
  readonly text: string;
}

const PARSE = `(() => {
  const injected = [];
  for (const el of document.querySelectorAll('*')) {
    for (const a of el.getAttributeNames()) {
      if (a.startsWith('data-pwn') || a.startsWith('pw-') || a.includes('<') || a.includes('"') || a.includes("'"))
        injected.push(el.tagName + '[' + a + ']');
    }
    if (el.tagName.includes('<') || el.tagName.toLowerCase().startsWith('pw-')) injected.push(el.tagName);
  }
  return {
    injected,
    title: document.title,
    styles: document.querySelectorAll('style').length,
    textareas: [...document.querySelectorAll('textarea')].map((t) => ({ name: t.name, value: t.value })),
    inputs: [...document.querySelectorAll('input')].map((i) => ({ name: i.name, value: i.value })),
    text: document.title + '\\n' + document.body.textContent,
  };
})()`;

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
      '--no-first-run',
      '--disable-background-networking',
    ],
  });
}

for (const target of storeTargets()) {
  describe(`hostile agent text on the admin pages (${target.name})`, () => {
    let store: TestStore;
    let admin: AdminServer;
    let base: string;
    let browser: Browser;
    let context: BrowserContext;
    let seeded: Seeded;

    beforeAll(async () => {
      store = await openTestStore(target);
      admin = createAdminServer({ store, token: TOKEN });
      base = `http://127.0.0.1:${(await admin.listen('127.0.0.1', 0)).port}`;
      seeded = await seed(store);
      browser = await launch();
      context = await browser.newContext({ extraHTTPHeaders: { authorization: `Bearer ${TOKEN}` } });
    }, 300_000);
    afterAll(async () => {
      await context?.close();
      await browser?.close();
      await admin?.close();
      await store?.close();
    });

    async function parse(path: string): Promise<Parsed> {
      const page = await context.newPage();
      try {
        const response = await page.goto(`${base}${path}`);
        const parsed = (await page.evaluate(PARSE)) as Omit<Parsed, 'status'>;
        return { status: response?.status() ?? 0, ...parsed };
      } finally {
        await page.close();
      }
    }

    it('every page shows every hostile field as text, never as markup', async () => {
      let text = '';
      for (const path of seeded.pages) {
        const p = await parse(path);
        expect([200, 400, 404], path).toContain(p.status);
        expect(p.injected, path).toEqual([]);
        expect(p.title, path).toMatch(/ · effectgate$/);
        expect(p.styles, path).toBe(1);
        // The Resolve form's only textarea is the operator's, and starts empty.
        for (const t of p.textareas) expect(t, path).toEqual({ name: 'ref', value: '' });
        // Form fields hold exactly what they are given: a Release form names the hostile scope, the
        // search form what was searched for.
        for (const input of p.inputs) {
          if (['tenant', 'area', 'agent'].includes(input.name) && input.value !== '')
            expect(input.value, path).toBe(pw(input.name));
          if (input.name === 'tool' && path.includes('tool='))
            expect(input.value, path).toBe(pw('search-tool'));
        }
        text += `\n${p.text}`;
      }
      const missing = FIELDS.filter((f) => !text.includes(shown(f)));
      expect(missing, 'fields no page shows as text').toEqual([]);
    }, 300_000);

    it('an error page shows the hostile value a form posted as text', async () => {
      for (const post of seeded.posts) {
        const reply = await context.request.post(`${base}${post.path}`, { form: post.form });
        expect(reply.status(), post.path).toBe(400);
        const page = await context.newPage();
        try {
          await page.setContent(await reply.text());
          const p = (await page.evaluate(PARSE)) as Omit<Parsed, 'status'>;
          expect(p.injected, post.path).toEqual([]);
          expect(p.title, post.path).toMatch(/ · effectgate$/);
          const field = /data-pwn=([\w-]+)/.exec(Object.values(post.form).join(' '))![1]!;
          expect(p.text, post.path).toContain(short(field));
        } finally {
          await page.close();
        }
      }
    }, 300_000);
  });
}
