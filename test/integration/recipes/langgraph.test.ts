/**
 * The LangGraph recipe (docs/recipes.md), in process: LangGraph's own tool loop (a `StateGraph`
 * whose `ToolNode` runs the tool calls of a chat model bound to the tools), a scripted chat model
 * standing in for the LLM, the real gate on a real store, and the tracker's ledger as the judge.
 * Two threads propose the same issue: the tracker has one, the second thread's model is handed the
 * gate's duplicate verdict naming the first thread, and the trail names both as the tool named them.
 */
import type { BaseChatModelParams } from '@langchain/core/language_models/chat_models';
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, type BaseMessage, HumanMessage, ToolMessage } from '@langchain/core/messages';
import type { ChatResult } from '@langchain/core/outputs';
import { type StructuredToolInterface, tool } from '@langchain/core/tools';
import { type LangGraphRunnableConfig, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { ToolNode, toolsCondition } from '@langchain/langgraph/prebuilt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { storeTargets } from '../../helpers/store.js';
import { type GatedTracker, startGatedTracker } from './gated-tracker.js';

// recipe: langgraph-tool
function createIssueTool(tracker: string) {
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
    if (result === undefined) throw new Error('the model was not called with the tool result');
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

async function runThread(tracker: string, threadId: string, title: string): Promise<ProposeOnce> {
  const model = new ProposeOnce(title);
  const graph = agentGraph(model, [createIssueTool(tracker)]);
  // recipe: langgraph-run
  await graph.invoke(
    { messages: [new HumanMessage(`Open an issue titled "${title}"`)] },
    { configurable: { thread_id: threadId }, recursionLimit: 10 },
  );
  // end recipe
  expect(model.inputs).toHaveLength(2);
  return model;
}

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
      expect(JSON.parse(first.toolResult())).toMatchObject({ status: 201, body: { title } });

      const second = await runThread(gated.tracker.url, 'langgraph-thread-2', title);
      const told = JSON.parse(second.toolResult());
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
