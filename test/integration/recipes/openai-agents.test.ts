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

// recipe: openai-agents-tool
interface RunNamed {
  readonly runId: string;
}

function createIssueTool(tracker: string) {
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
      // A 409 from the gate is an answer, not a failure: the model reads it and moves on.
      return JSON.stringify({ status: res.status, body: await res.json() });
    },
  });
}
// end recipe

// recipe: openai-agents-error-function
function createIssueToolThatThrows(tracker: string) {
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
    // The SDK's default tells the model only "An error occurred while running the tool".
    errorFunction: (_context, error) => (error instanceof Error ? error.message : String(error)),
  });
}
// end recipe

/**
 * A model that proposes `create_issue` once, then ends the run with a message, and keeps every
 * input the runner gave it: the tool results the LLM would have read.
 */
class ProposeOnce implements Model {
  readonly inputs: (string | AgentInputItem[])[] = [];
  constructor(private readonly title: string) {}

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    this.inputs.push(structuredClone(request.input));
    const output: ModelResponse['output'] =
      this.inputs.length === 1
        ? [
            {
              type: 'function_call',
              callId: `call-${this.inputs.length}`,
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
    throw new Error('the recipe runs are not streamed');
  }

  /** What the runner handed back for the tool call, as the model read it. */
  toolResult(): string {
    const items = this.inputs[1];
    if (!Array.isArray(items)) throw new Error('the model was not called with the tool result');
    const result = items.find((i) => i.type === 'function_call_result');
    if (result === undefined) throw new Error('no function_call_result in the model input');
    return JSON.stringify(result);
  }
}

const runner = new Runner({ tracingDisabled: true });

async function runAgent(
  makeTool: (tracker: string) => Tool<RunNamed>,
  tracker: string,
  runId: string,
  title: string,
): Promise<ProposeOnce> {
  const model = new ProposeOnce(title);
  const agent = new Agent<RunNamed>({
    name: 'triage',
    instructions: 'Open the issue you are asked for.',
    model,
    tools: [makeTool(tracker)],
  });
  // recipe: openai-agents-run
  await runner.run(agent, `Open an issue titled "${title}"`, { context: { runId } });
  // end recipe
  expect(model.inputs).toHaveLength(2);
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
      const first = await runAgent(createIssueTool, gated.tracker.url, 'agents-run-1', title);
      expect(JSON.parse(JSON.parse(first.toolResult()).output.text)).toMatchObject({
        status: 201,
        body: { title },
      });

      const second = await runAgent(createIssueTool, gated.tracker.url, 'agents-run-2', title);
      const told = JSON.parse(JSON.parse(second.toolResult()).output.text);
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
      await runAgent(createIssueToolThatThrows, gated.tracker.url, 'agents-run-3', title);
      const second = await runAgent(createIssueToolThatThrows, gated.tracker.url, 'agents-run-4', title);
      expect(second.toolResult()).toContain('HTTP 409');
      expect(second.toolResult()).toContain('was already carried out by run agents-run-3');
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
      await runAgent(withoutErrorFunction, gated.tracker.url, 'agents-run-5', title);
      const second = await runAgent(withoutErrorFunction, gated.tracker.url, 'agents-run-6', title);
      expect(second.toolResult()).toContain('An error occurred while running the tool');
      expect(second.toolResult()).not.toContain('already carried out');
      expect(gated.issues('acme/api').filter((i) => i.title === title)).toHaveLength(1);
    });
  });
}
