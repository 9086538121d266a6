/**
 * The Vercel AI SDK recipe (docs/recipes.md), in process: the SDK's own tool loop
 * (`generateText` with tools and `stopWhen`), its `MockLanguageModelV3` scripted to propose a tool
 * call and then answer, the real gate on a real store, and the tracker's ledger as the judge. Two
 * runs propose the same issue: the tracker has one, the second run's model is handed the gate's
 * duplicate verdict naming the first run, and the trail names both as the tool named them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeTargets } from '../../helpers/store.js';
import { runAgent } from './ai-sdk-recipe.js';
import { type GatedTracker, startGatedTracker } from './gated-tracker.js';

for (const target of storeTargets()) {
  describe(`Vercel AI SDK recipe in process (${target.name})`, () => {
    let gated: GatedTracker;

    beforeAll(async () => {
      gated = await startGatedTracker(target);
    });
    afterAll(async () => {
      await gated?.close();
    });

    it('returns the gate verdict as the tool result: one issue, the second run told it is done and by whom', async () => {
      const title = 'Disk full on db-1 (ai sdk)';
      const first = await runAgent(gated.tracker.url, 'ai-sdk-run-1', title);
      expect(JSON.parse(first)).toMatchObject({ status: 201, body: { title } });

      const second = await runAgent(gated.tracker.url, 'ai-sdk-run-2', title);
      const told = JSON.parse(second);
      expect(told).toMatchObject({
        status: 409,
        body: { verdict: 'duplicate', source: { run_id: 'ai-sdk-run-1' } },
      });
      expect(told.body.detail).toContain('was already carried out by run ai-sdk-run-1');

      expect(gated.issues('acme/api').filter((i) => i.title === title)).toHaveLength(1);
      const [allowed] = await gated.decisionsOf('ai-sdk-run-1');
      const [skipped] = await gated.decisionsOf('ai-sdk-run-2');
      expect(allowed).toMatchObject({ verdict: 'allow', toolId: 'test.create_issue' });
      expect(skipped).toMatchObject({ verdict: 'duplicate', operationId: allowed!.operationId });
    });
  });
}
