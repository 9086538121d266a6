/**
 * The OpenAI Agents SDK recipe (docs/recipes.md) and what runs it: the SDK's own runner and tool
 * loop over a scripted `Model` standing in for the LLM. Used in process (openai-agents.test.ts)
 * and through the proxy (test/e2e/agent-recipes.test.ts); the tool's `fetch` goes wherever the
 * process's global dispatcher sends it.
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
import { z } from 'zod';

// recipe: openai-agents-tool
export interface RunNamed {
  readonly runId: string;
}

export function createIssueTool(tracker: string) {
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
export function createIssueToolThatThrows(tracker: string) {
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

  /** The tool's result as the model read it in its second call. */
  toolResult(): string {
    const items = this.inputs[1];
    const result = Array.isArray(items) ? items.find((i) => i.type === 'function_call_result') : undefined;
    if (this.inputs.length !== 2 || result === undefined) {
      throw new Error(`expected a tool call and its result, the model saw ${JSON.stringify(this.inputs)}`);
    }
    const { output } = result;
    if (typeof output === 'string') return output;
    return !Array.isArray(output) && output.type === 'text' ? output.text : JSON.stringify(output);
  }
}

const runner = new Runner({ tracingDisabled: true });

/**
 * One agent run named `runId` whose model proposes the issue `title` once; resolves with the tool
 * result its model read.
 */
export async function runAgent(
  tracker: string,
  runId: string,
  title: string,
  makeTool: (tracker: string) => Tool<RunNamed> = createIssueTool,
): Promise<string> {
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
  return model.toolResult();
}
