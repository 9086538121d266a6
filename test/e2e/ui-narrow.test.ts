/**
 * From the admin UI's hostile review: "usable at 760 px" (scrollWidth <= clientWidth) with long values that come from
 * a client (run id header, scope names) or from the store (refs), in a real Chromium.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { handleUi } from '../../src/admin/index.js';
import { openTestStore, storeTargets, type TestStore } from '../helpers/store.js';
import { expectVerdict, newKey, newRun, outcome, reserve, scope } from '../integration/store/inputs.js';

const TOKEN = 'eg-review3-760-0123456789ab';
const LONG = 'x'.repeat(120);

async function overflowAt760(page: Page, path: string): Promise<number> {
  await page.setViewportSize({ width: 760, height: 900 });
  await page.goto(path);
  return (await page.evaluate(
    'document.documentElement.scrollWidth - document.documentElement.clientWidth',
  )) as number;
}

for (const target of storeTargets().slice(0, 1)) {
  describe(`760 px with long values (${target.name})`, () => {
    let store: TestStore;
    let server: Server;
    let base: string;
    let browser: Browser;
    let page: Page;
    let run: string;
    let operationId: string;

    beforeAll(async () => {
      store = await openTestStore(target);
      server = createServer((req, res) => {
        handleUi(req, res, { store, token: TOKEN }).then(
          (h) => {
            if (!h) res.writeHead(404).end();
          },
          () => res.destroy(),
        );
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      browser = await chromium.launch({
        executablePath: process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium',
        args: ['--headless', '--no-sandbox', '--disable-gpu'],
      });
      const ctx = await browser.newContext({ extraHTTPHeaders: { authorization: `Bearer ${TOKEN}` } });
      page = await ctx.newPage();

      // A run with a long (legal) scope, halted by the loop breaker.
      const longScope = { tenant: `tenant-${LONG}`, area: `area-${LONG}`, agent: `agent-${LONG}` };
      const key = newKey({ values: ['acme', LONG] });
      const first = await store.decide(reserve(newRun(), key, { scope: longScope }));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'succeeded'));
      operationId = first.operationId;
      run = `run-${LONG}`;
      expectVerdict(
        await store.decide(reserve(run, key, { scope: longScope, maxDuplicateSkips: 1 })),
        'duplicate',
      );
      expectVerdict(
        await store.decide(reserve(run, key, { scope: longScope, maxDuplicateSkips: 1 })),
        'halted',
      );
      void scope;
    });

    afterAll(async () => {
      await browser?.close();
      await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
      await store?.close();
    });

    it('the run page of a halted run with a long scope does not scroll sideways', async () => {
      expect(await overflowAt760(page, `${base}/ui/runs/${run}`)).toBeLessThanOrEqual(0);
    });

    it('the operation page of a long-scoped operation does not scroll sideways', async () => {
      expect(await overflowAt760(page, `${base}/ui/operations/${operationId}`)).toBeLessThanOrEqual(0);
    });

    it('the error page for a long unknown run id does not scroll sideways', async () => {
      expect(await overflowAt760(page, `${base}/ui/runs/no-such-${LONG}`)).toBeLessThanOrEqual(0);
    });
  });
}
