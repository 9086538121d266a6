/**
 * The LangGraph recipe (docs/recipes.md), in process: LangGraph's own tool loop (a `StateGraph`
 * whose `ToolNode` runs the tool calls of a chat model bound to the tools), a scripted chat model
 * standing in for the LLM, the real gate on a real store, and the tracker's ledger as the judge.
 * Two threads propose the same issue: the tracker has one, the second thread's model is handed the
 * gate's duplicate verdict naming the first thread, and the trail names both as the tool named them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeTargets } from '../../helpers/store.js';
import { type GatedTracker, startGatedTracker } from './gated-tracker.js';
import { runThread } from './langgraph-recipe.js';

for (const target of storeTargets()) {
  describe(`LangGraph recipe in process (${target.name})`, () => {
    let gated: GatedTracker;

    beforeAll(async () => {
      gated = await startGatedTracker(target);
    });
    afterAll(async () => {
      await gated?.close();
    });

    it('returns the gate verdict as the tool result: one issue, the second thread told it is done and by whom', async () => {
      const title = 'Disk full on db-1 (langgraph)';
      const first = await runThread(gated.tracker.url, 'langgraph-thread-1', title);
      expect(JSON.parse(first)).toMatchObject({ status: 201, body: { title } });

      const second = await runThread(gated.tracker.url, 'langgraph-thread-2', title);
      const told = JSON.parse(second);
      expect(told).toMatchObject({
        status: 409,
        body: { verdict: 'duplicate', source: { run_id: 'langgraph-thread-1' } },
      });
      expect(told.body.detail).toContain('was already carried out by run langgraph-thread-1');

      expect(gated.issues('acme/api').filter((i) => i.title === title)).toHaveLength(1);
      const [allowed] = await gated.decisionsOf('langgraph-thread-1');
      const [skipped] = await gated.decisionsOf('langgraph-thread-2');
      expect(allowed).toMatchObject({ verdict: 'allow', toolId: 'test.create_issue' });
      expect(skipped).toMatchObject({ verdict: 'duplicate', operationId: allowed!.operationId });
    });
  });
}
