/**
 * From the admin UI's hostile review: the run page's Release form carries the scope in hidden inputs rendered with
 * escapeHtml, which rewrites invisible format characters (Unicode Cf) as "[U+XXXX]". The posted
 * scope is then not the run's scope: Release of such a run fails from the page (or names another
 * scope spelled literally "[U+XXXX]").
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AdminServer, createAdminServer } from '../../../src/admin/index.js';
import { type AdminReply, adminCall } from '../../helpers/admin-call.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, outcome, reserve } from '../store/inputs.js';

const TOKEN = 'eg-review3-release-0123456789';

const call = (port: number, method: string, path: string, body?: string): Promise<AdminReply> =>
  adminCall(port, TOKEN, method, path, body);

const unescapeAttribute = (s: string): string =>
  s
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&#96;/g, '`')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');

for (const target of storeTargets()) {
  describe(`release form (${target.name})`, () => {
    let store: TestStore;
    let admin: AdminServer;
    let port: number;
    beforeAll(async () => {
      store = await openTestStore(target);
      admin = createAdminServer({ store, token: TOKEN });
      port = (await admin.listen('127.0.0.1', 0)).port;
    });
    afterAll(async () => {
      await admin?.close();
      await store?.close();
    });

    it('releases a halted run whose agent name holds a soft hyphen (U+00AD), as the browser submits the form', async () => {
      const sc = { tenant: 'acme', area: 'support', agent: 'triage\u00adbot' };
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key, { scope: sc }));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'succeeded'));
      const run = newRun();
      expectVerdict(await store.decide(reserve(run, key, { scope: sc, maxDuplicateSkips: 1 })), 'duplicate');
      expectVerdict(await store.decide(reserve(run, key, { scope: sc, maxDuplicateSkips: 1 })), 'halted');

      const pageHtml = (await call(port, 'GET', `/ui/runs/${run}`)).text;
      const formHtml = /<form class="decide"[\s\S]*?<\/form>/.exec(pageHtml)![0];
      const fields = new URLSearchParams();
      for (const m of formHtml.matchAll(/<input type="hidden" name="([a-z]+)" value="([^"]*)">/g))
        fields.set(m[1]!, unescapeAttribute(m[2]!));
      fields.set('by', 'oncall');
      fields.set('reason', 'prompt fixed');
      const r = await call(port, 'POST', `/ui/runs/${run}/release`, fields.toString());
      expect(r.status, r.text.match(/id="error-message">([^<]*)/)?.[1]).toBe(303);
      expect(fields.get('agent')).toBe(sc.agent); // is "triage[U+00AD]bot"
    });
  });
}
