/**
 * From the admin UI's hostile review: confirmation banners that a crafted link (or a stale landing URL) makes say
 * something false, although "only a real matching record" is shown.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AdminServer, createAdminServer } from '../../../src/admin/index.js';
import { csrfToken } from '../../../src/admin/ui/session.js';
import type { DedupeKeyInput } from '../../../src/store/index.js';
import { type AdminReply, adminCall } from '../../helpers/admin-call.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, outcome, reserve, scope } from '../store/inputs.js';

const TOKEN = 'eg-review3-token-0123456789ab';
const CSRF = csrfToken(TOKEN, 'bearer');

const call = (
  port: number,
  method: string,
  path: string,
  form?: Record<string, string>,
): Promise<AdminReply> => adminCall(port, TOKEN, method, path, form);

function banner(text: string): string | null {
  const m = /<p class="banner (?:ok|note)" role="status" id="confirmation">([\s\S]*?)<\/p>/.exec(text);
  return m === null ? null : m[1]!.replace(/<[^>]+>/g, '');
}

for (const target of storeTargets()) {
  describe(`confirmation banners (${target.name})`, () => {
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

    async function held(): Promise<{ key: DedupeKeyInput; operationId: string; approvalId: string }> {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key, { unknownRule: 'hold' }));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'unknown'));
      const h = await store.decide(reserve(newRun(), key, { unknownRule: 'hold' }));
      expectVerdict(h, 'hold');
      return { key, operationId: first.operationId, approvalId: h.approvalId };
    }

    it('a link to an approval already USED shows no "exactly one more attempt may start" banner', async () => {
      const h = await held();
      await store.decideApproval({
        approvalId: h.approvalId,
        action: 'approve',
        by: 'alice',
        reason: 'ok',
        ttlMs: 3_600_000,
      });
      expectVerdict(await store.decide(reserve(newRun(), h.key)), 'allow'); // the one retry
      expect(await store.getApproval(h.approvalId)).toMatchObject({ state: 'used' });

      for (const path of [
        `/ui/approvals?decided=${h.approvalId}`,
        `/ui/operations/${h.operationId}?decided=${h.approvalId}`,
      ]) {
        const r = await call(port, 'GET', path);
        expect(r.status).toBe(200);
        const b = banner(r.text);
        // Either no banner (it was not just decided) or the truth: the retry already started.
        expect(b ?? '', path).not.toMatch(/Exactly one more attempt may start/);
      }
    });

    it('a link to an EXPIRED approval shows no "may start until <past time>" banner', async () => {
      const h = await held();
      await store.decideApproval({
        approvalId: h.approvalId,
        action: 'approve',
        by: 'alice',
        reason: 'ok',
        ttlMs: 1_000,
      });
      await new Promise((r) => setTimeout(r, 1_500));
      expect(await store.getApproval(h.approvalId)).toMatchObject({ state: 'expired' });
      const r = await call(port, 'GET', `/ui/approvals?decided=${h.approvalId}`);
      expect(banner(r.text) ?? '').not.toMatch(/Exactly one more attempt may start/);
    });

    it('a link to an old release of a run halted AGAIN shows no "Released: … decided as usual" banner', async () => {
      // A done key, a run that loops on it until halted.
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'succeeded'));
      const run = newRun();
      const loopUntilHalted = async (): Promise<void> => {
        for (let i = 0; i < 5; i++) {
          const d = await store.decide(reserve(run, key, { maxDuplicateSkips: 2 }));
          if (d.verdict === 'halted') return;
        }
        throw new Error('never halted');
      };
      await loopUntilHalted();
      // The operator releases it with the form: the landing URL carries ?released=<id>.
      const rel = await call(port, 'POST', `/ui/runs/${run}/release`, {
        csrf: CSRF,
        by: 'alice',
        reason: 'fixed the agent',
        tenant: scope.tenant,
        area: scope.area,
        agent: scope.agent,
      });
      expect(rel.status).toBe(303);
      const landing = rel.location!;
      expect(landing).toMatch(/\?released=/);
      // The agent loops again and is halted again.
      await loopUntilHalted();
      const [record] = await store.listRuns({ runId: run });
      expect(record?.haltedAt).not.toBeNull();

      const r = await call(port, 'GET', landing.split('#')[0]!);
      expect(r.status).toBe(200);
      expect(r.text).toContain('⚠ halted');
      // The page now says both "halted" (card) and "Released: the run's next governed call is decided as usual".
      expect(banner(r.text) ?? '').not.toMatch(/next governed call is decided as usual/);
    });

    it("the error page's Back link carries no confirmation (commit 139d060 claims so)", async () => {
      const a = await held();
      const b = await held();
      const ok = await call(port, 'POST', `/ui/approvals/${a.approvalId}/approve`, {
        csrf: CSRF,
        by: 'alice',
        reason: 'checked',
        back: '/ui/approvals?state=requested',
      });
      expect(ok.status).toBe(303);
      const landing = ok.location!; // /ui/approvals?state=requested&decided=<a>
      expect(landing).toContain(`decided=${a.approvalId}`);
      // From that landing page, the operator approves B with a bad ttl: an error page.
      const bad = await call(port, 'POST', `/ui/approvals/${b.approvalId}/approve`, {
        csrf: CSRF,
        by: 'alice',
        reason: 'checked',
        ttl: 'soon',
        back: landing,
      });
      expect(bad.status).toBe(400);
      const back = /<p><a href="([^"]*)">Back<\/a><\/p>/.exec(bad.text)?.[1];
      expect(back).toBeDefined();
      // Following Back shows "Approved approval <A>" again, right after B failed.
      expect(back!.replace(/&amp;/g, '&')).not.toMatch(/[?&]decided=/);
    });
  });
}
