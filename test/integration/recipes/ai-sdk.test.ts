/**
 * The Vercel AI SDK recipe (docs/recipes.md), in process: the SDK's own tool loop
 * (`generateText` with tools and `stopWhen`), its `MockLanguageModelV3` scripted to propose a tool
 * call and then answer, the real gate on a real store, and the tracker's ledger as the judge. Two
 * runs propose the same issue: the tracker has one, the second run's model is handed the gate's
 * duplicate verdict naming the first run, and the trail names both as the tool named them.
 */
import { generateText, stepCountIs, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { storeTargets } from '../../helpers/store.js';
import { type GatedTracker, startGatedTracker } from './gated-tracker.js';

// recipe: ai-sdk-tool
interface RunNamed {
  readonly runId: string;
}

function createIssueTool(tracker: string) {
  return tool({
    description: 'Open an issue in acme/api',
    inputSchema: z.object({ title: z.string() }),
    async execute({ title }, { experimental_context }) {
      const { runId } = experimental_context as RunNamed;
      const res = await fetch(`${tracker}/repos/acme/api/issues`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'effectgate-run': runId },
        body: JSON.stringify({ title }),
      });
      // A 409 from the gate is an answer, not a failure: the model reads it and moves on.
      return { status: res.status, body: await res.json() };
    },
  });
}
// end recipe

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

/** A mock model that proposes `create_issue` once, then answers with text. */
function proposeOnce(title: string): MockLanguageModelV3 {
  let calls = 0;
  return new MockLanguageModelV3({
    doGenerate: async () => {
      calls += 1;
      return calls === 1
        ? {
            content: [
              {
                type: 'tool-call',
                toolCallId: 'call-1',
                toolName: 'create_issue',
                input: JSON.stringify({ title }),
              },
            ],
            finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
            usage,
            warnings: [],
          }
        : {
            content: [{ type: 'text', text: 'Done.' }],
            finishReason: { unified: 'stop', raw: 'stop' },
            usage,
            warnings: [],
          };
    },
  });
}

/** The tool result the model read in its second call, as the prompt carried it. */
function toolResult(model: MockLanguageModelV3): unknown {
  const prompt = model.doGenerateCalls[1]?.prompt ?? [];
  for (const message of prompt) {
    if (message.role !== 'tool') continue;
    for (const part of message.content) {
      if (part.type === 'tool-result' && part.output.type === 'json') return part.output.value;
    }
  }
  throw new Error('the model was not called with the tool result');
}

async function runAgent(tracker: string, runId: string, title: string): Promise<MockLanguageModelV3> {
  const model = proposeOnce(title);
  // recipe: ai-sdk-run
  await generateText({
    model,
    tools: { create_issue: createIssueTool(tracker) },
    prompt: `Open an issue titled "${title}"`,
    stopWhen: stepCountIs(5),
    experimental_context: { runId },
  });
  // end recipe
  expect(model.doGenerateCalls).toHaveLength(2);
  return model;
}

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
      expect(toolResult(first)).toMatchObject({ status: 201, body: { title } });

      const second = await runAgent(gated.tracker.url, 'ai-sdk-run-2', title);
      const told = toolResult(second) as { body: { detail: string } };
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
