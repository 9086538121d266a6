/**
 * The OpenAI Agents SDK recipe (docs/recipes.md), in process: the SDK's own runner and tool loop,
 * a scripted `Model` standing in for the LLM, the real gate on a real store, and the tracker's
 * ledger as the judge. Two runs of the agent propose the same issue: the tracker has one, the
 * second run's model is handed the gate's duplicate verdict naming the first run, and the trail
 * names both runs as the tool named them.
 */
import { type RunContext, tool } from '@openai/agents';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { storeTargets } from '../../helpers/store.js';
import { type GatedTracker, startGatedTracker } from './gated-tracker.js';
import { createIssueToolThatThrows, type RunNamed, runAgent } from './openai-agents-recipe.js';

for (const target of storeTargets()) {
  describe(`OpenAI Agents SDK recipe in process (${target.name})`, () => {
    let gated: GatedTracker;

    beforeAll(async () => {
      gated = await startGatedTracker(target);
    });
    afterAll(async () => {
      await gated?.close();
    });

    it('returns the gate verdict as the tool result: one issue, the second run told it is done and by whom', async () => {
      const title = 'Disk full on db-1 (agents sdk)';
      const first = await runAgent(gated.tracker.url, 'agents-run-1', title);
      expect(JSON.parse(first)).toMatchObject({ status: 201, body: { title } });

      const second = await runAgent(gated.tracker.url, 'agents-run-2', title);
      const told = JSON.parse(second);
      expect(told).toMatchObject({
        status: 409,
        body: { verdict: 'duplicate', source: { run_id: 'agents-run-1' } },
      });
      expect(told.body.detail).toContain('was already carried out by run agents-run-1');

      expect(gated.issues('acme/api').filter((i) => i.title === title)).toHaveLength(1);
      const [allowed] = await gated.decisionsOf('agents-run-1');
      const [skipped] = await gated.decisionsOf('agents-run-2');
      expect(allowed).toMatchObject({ verdict: 'allow', toolId: 'test.create_issue' });
      expect(skipped).toMatchObject({ verdict: 'duplicate', operationId: allowed!.operationId });
    });

    it('with errorFunction, a tool that throws on a non-2xx still hands the model the verdict', async () => {
      const title = 'Disk full on db-2 (agents sdk, throwing client)';
      await runAgent(gated.tracker.url, 'agents-run-3', title, createIssueToolThatThrows);
      const second = await runAgent(gated.tracker.url, 'agents-run-4', title, createIssueToolThatThrows);
      expect(second).toContain('HTTP 409');
      expect(second).toContain('was already carried out by run agents-run-3');
      expect(gated.issues('acme/api').filter((i) => i.title === title)).toHaveLength(1);
      expect(await gated.decisionsOf('agents-run-4')).toEqual([
        expect.objectContaining({ verdict: 'duplicate' }),
      ]);
    });

    it("without errorFunction, the SDK's default hides the verdict from the model (why the recipe sets it)", async () => {
      const title = 'Disk full on db-3 (agents sdk, default error handler)';
      const withoutErrorFunction = (tracker: string) =>
        tool({
          name: 'create_issue',
          description: 'Open an issue in acme/api',
          parameters: z.object({ title: z.string() }),
          async execute({ title }, runContext?: RunContext<RunNamed>) {
            const res = await fetch(`${tracker}/repos/acme/api/issues`, {
              method: 'POST',
              headers: { 'content-type': 'application/json', 'effectgate-run': runContext!.context.runId },
              body: JSON.stringify({ title }),
            });
            if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
            return await res.text();
          },
        });
      await runAgent(gated.tracker.url, 'agents-run-5', title, withoutErrorFunction);
      const second = await runAgent(gated.tracker.url, 'agents-run-6', title, withoutErrorFunction);
      expect(second).toBe('An error occurred while running the tool. Please try again.');
      expect(second).not.toContain('already carried out');
      expect(gated.issues('acme/api').filter((i) => i.title === title)).toHaveLength(1);
    });
  });
}
