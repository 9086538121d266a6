/**
 * The Vercel AI SDK recipe (docs/recipes.md) and what runs it: the SDK's own tool loop
 * (`generateText` with tools and `stopWhen`) over its `MockLanguageModelV3`, scripted to propose a
 * tool call and then answer. Used in process (ai-sdk.test.ts) and through the proxy
 * (test/e2e/agent-recipes.test.ts).
 */
import { generateText, stepCountIs, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';

// recipe: ai-sdk-tool
interface RunNamed {
  readonly runId: string;
}

export function createIssueTool(tracker: string) {
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

/** The tool's result as the model read it in its second call (its JSON text). */
function toolResult(model: MockLanguageModelV3): string {
  const prompt = model.doGenerateCalls.length === 2 ? model.doGenerateCalls[1]!.prompt : [];
  for (const message of prompt) {
    if (message.role !== 'tool') continue;
    for (const part of message.content) {
      if (part.type === 'tool-result' && part.output.type === 'json')
        return JSON.stringify(part.output.value);
    }
  }
  throw new Error(
    `expected a tool call and its result, the model saw ${JSON.stringify(model.doGenerateCalls)}`,
  );
}

/**
 * One `generateText` run named `runId` whose model proposes the issue `title` once; resolves with
 * the tool result its model read.
 */
export async function runAgent(tracker: string, runId: string, title: string): Promise<string> {
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
  return toolResult(model);
}
