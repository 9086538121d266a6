/**
 * The OpenAI Agents SDK recipe (docs/recipes.md), in process: the SDK's own runner and tool loop,
 * a scripted `Model` standing in for the LLM, the real gate on a real store, and the tracker's
 * ledger as the judge. Two runs of the agent propose the same issue: the tracker has one, the
 * second run's model is handed the gate's duplicate verdict naming the first run, and the trail
 * names both runs as the tool named them.
 */
import {
  Agent,
  type AgentInputItem,
  type Model,
  type ModelRequest,
  type ModelResponse,
  type RunContext,
  Runner,
  type Tool,
  tool,
  Usage,
} from '@openai/agents';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { storeTargets } from '../../helpers/store.js';
import { type GatedTracker, startGatedTracker } from './gated-tracker.js';
import {
  createIssueTool,
  createIssueToolThatThrows,
  type RunNamed,
  runAgent,
} from './openai-agents-recipe.js';

/** The recipe's throwing tool as most tools are written: no `errorFunction`. */
function createIssueToolWithoutErrorFunction(tracker: string) {
  return tool({
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
}

/**
 * A stand-in for an LLM that does what it is told: it proposes `create_issue` again after each
 * tool result until one tells it not to retry (the gate's duplicate detail does), at most
 * `proposals` times, then ends the run. What it read is kept.
 */
class RetriesUntilTold implements Model {
  readonly results: string[] = [];
  constructor(
    private readonly title: string,
    private readonly proposals: number,
  ) {}

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const items = Array.isArray(request.input) ? (request.input as AgentInputItem[]) : [];
    const results = items.filter((i) => i.type === 'function_call_result');
    const last = results.at(-1);
    if (last !== undefined) this.results.push(JSON.stringify(last.output));
    const told = this.results.at(-1)?.includes('Do not retry') ?? false;
    const output: ModelResponse['output'] =
      !told && results.length < this.proposals
        ? [
            {
              type: 'function_call',
              callId: `call-${results.length + 1}`,
              name: 'create_issue',
              arguments: JSON.stringify({ title: this.title }),
              status: 'completed',
            },
          ]
        : [
            {
              type: 'message',
              role: 'assistant',
              status: 'completed',
              content: [{ type: 'output_text', text: 'Done.' }],
            },
          ];
    return { usage: new Usage(), output };
  }

  getStreamedResponse(): AsyncIterable<never> {
    throw new Error('not streamed');
  }
}

async function runRetrying(
  makeTool: (tracker: string) => Tool<RunNamed>,
  tracker: string,
  runId: string,
  title: string,
): Promise<RetriesUntilTold> {
  const model = new RetriesUntilTold(title, 6);
  const agent = new Agent<RunNamed>({ name: 'triage', model, tools: [makeTool(tracker)] });
  await new Runner({ tracingDisabled: true }).run(agent, `Open an issue titled "${title}"`, {
    context: { runId },
    maxTurns: 10,
  });
  return model;
}

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
      await runAgent(gated.tracker.url, 'agents-run-5', title, createIssueToolWithoutErrorFunction);
      const second = await runAgent(
        gated.tracker.url,
        'agents-run-6',
        title,
        createIssueToolWithoutErrorFunction,
      );
      expect(second).toBe('An error occurred while running the tool. Please try again.');
      expect(second).not.toContain('already carried out');
      expect(gated.issues('acme/api').filter((i) => i.title === title)).toHaveLength(1);
    });

    it('a model told "Please try again" retries into the loop breaker; one handed the verdict stops at once', async () => {
      const title = 'Disk full on db-4 (agents sdk, a model that retries)';
      await runRetrying(createIssueTool, gated.tracker.url, 'agents-run-7', title);

      // The SDK's default error text: every retry is another duplicate, until the run is halted.
      const retried = await runRetrying(
        createIssueToolWithoutErrorFunction,
        gated.tracker.url,
        'agents-run-8',
        title,
      );
      expect(retried.results).toHaveLength(6);
      expect((await gated.decisionsOf('agents-run-8')).map((d) => d.verdict)).toEqual([
        'duplicate',
        'duplicate',
        'duplicate',
        'halted',
        'halted',
        'halted',
      ]);
      const [halted] = await gated.store.listRuns({ runId: 'agents-run-8' });
      expect(halted?.haltedAt).not.toBeNull();

      // The recipe: the model reads the verdict and stops after one proposal; nothing is halted.
      const told = await runRetrying(createIssueTool, gated.tracker.url, 'agents-run-9', title);
      expect(told.results).toHaveLength(1);
      expect(told.results[0]).toContain('was already carried out by run agents-run-7');
      expect((await gated.decisionsOf('agents-run-9')).map((d) => d.verdict)).toEqual(['duplicate']);
      const [named] = await gated.store.listRuns({ runId: 'agents-run-9' });
      expect(named?.haltedAt ?? null).toBeNull();

      expect(gated.issues('acme/api').filter((i) => i.title === title)).toHaveLength(1);
    });
  });
}
