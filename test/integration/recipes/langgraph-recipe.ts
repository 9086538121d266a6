/**
 * The LangGraph recipe (docs/recipes.md) and what runs it: LangGraph's own tool loop (a
 * `StateGraph` whose `ToolNode` runs the tool calls of a chat model bound to the tools) over a
 * scripted chat model standing in for the LLM. Used in process (langgraph.test.ts) and through the
 * proxy (test/e2e/agent-recipes.test.ts).
 */
import type { BaseChatModelParams } from '@langchain/core/language_models/chat_models';
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, type BaseMessage, HumanMessage, ToolMessage } from '@langchain/core/messages';
import type { ChatResult } from '@langchain/core/outputs';
import { type StructuredToolInterface, tool } from '@langchain/core/tools';
import { type LangGraphRunnableConfig, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { ToolNode, toolsCondition } from '@langchain/langgraph/prebuilt';
import { z } from 'zod';

// recipe: langgraph-tool
export function createIssueTool(tracker: string) {
  return tool(
    async ({ title }, config: LangGraphRunnableConfig) => {
      const res = await fetch(`${tracker}/repos/acme/api/issues`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'effectgate-run': config.configurable!.thread_id },
        body: JSON.stringify({ title }),
      });
      // A 409 from the gate is an answer, not a failure: the model reads it and moves on.
      return JSON.stringify({ status: res.status, body: await res.json() });
    },
    {
      name: 'create_issue',
      description: 'Open an issue in acme/api',
      schema: z.object({ title: z.string() }),
    },
  );
}
// end recipe

/**
 * A chat model that proposes `create_issue` once, then answers with a message, and keeps every
 * list of messages the graph gave it: the tool results the LLM would have read.
 */
class ProposeOnce extends BaseChatModel {
  readonly inputs: BaseMessage[][] = [];
  readonly title: string;

  constructor(title: string, fields: BaseChatModelParams = {}) {
    super(fields);
    this.title = title;
  }

  _llmType(): string {
    return 'propose-once';
  }

  override bindTools(): this {
    return this;
  }

  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    this.inputs.push([...messages]);
    const message =
      this.inputs.length === 1
        ? new AIMessage({
            content: '',
            tool_calls: [
              { id: 'call-1', name: 'create_issue', args: { title: this.title }, type: 'tool_call' },
            ],
          })
        : new AIMessage('Done.');
    return { generations: [{ message, text: typeof message.content === 'string' ? message.content : '' }] };
  }

  /** The tool's result as the model read it in its second call. */
  toolResult(): string {
    const result = this.inputs[1]?.find((m) => m instanceof ToolMessage);
    if (this.inputs.length !== 2 || result === undefined) {
      throw new Error(`expected a tool call and its result, the model saw ${JSON.stringify(this.inputs)}`);
    }
    return String(result.content);
  }
}

function agentGraph(model: ProposeOnce, tools: StructuredToolInterface[]) {
  return new StateGraph(MessagesAnnotation)
    .addNode('agent', async (state) => ({ messages: [await model.bindTools().invoke(state.messages)] }))
    .addNode('tools', new ToolNode(tools))
    .addEdge(START, 'agent')
    .addConditionalEdges('agent', toolsCondition)
    .addEdge('tools', 'agent')
    .compile();
}

/**
 * One graph run on thread `threadId` whose model proposes the issue `title` once; resolves with
 * the tool result its model read.
 */
export async function runThread(tracker: string, threadId: string, title: string): Promise<string> {
  const model = new ProposeOnce(title);
  const graph = agentGraph(model, [createIssueTool(tracker)]);
  // recipe: langgraph-run
  await graph.invoke(
    { messages: [new HumanMessage(`Open an issue titled "${title}"`)] },
    { configurable: { thread_id: threadId }, recursionLimit: 10 },
  );
  // end recipe
  return model.toolResult();
}
