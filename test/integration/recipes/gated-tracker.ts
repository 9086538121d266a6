/**
 * What every in-process recipe test stands on: a real gate on a real store (`target`), the
 * end-to-end suite's tracker policy, and the stateful loopback issue tracker as the destination.
 * The gate is the process's global dispatcher while the suite runs, so a tool's plain `fetch()`
 * goes through it exactly as in an agent that followed README "Node agents in process".
 */
import { Agent, type Dispatcher, getGlobalDispatcher, setGlobalDispatcher } from 'undici';
import { createGate, type Gate } from '../../../src/engine/index.js';
import type { DecisionRecord } from '../../../src/store/index.js';
import { gateInterceptor } from '../../../src/undici/index.js';
import { type Issue, type IssueTracker, startIssueTracker } from '../../helpers/issue-tracker.js';
import { openTestStore, type StoreTarget, type TestStore } from '../../helpers/store.js';

export const POLICIES = new URL('../../fixtures/e2e-policies/', import.meta.url).pathname;

export interface GatedTracker {
  readonly tracker: IssueTracker;
  readonly store: TestStore;
  readonly gate: Gate;
  /** The tracker's own ledger of `owner/repo`'s issues. */
  issues(repo: string): Issue[];
  /** The trail's decisions of one run, oldest first. */
  decisionsOf(run: string): Promise<DecisionRecord[]>;
  close(): Promise<void>;
}

export async function startGatedTracker(target: StoreTarget): Promise<GatedTracker> {
  const store = await openTestStore(target);
  const tracker = await startIssueTracker();
  const gate = await createGate({
    policies: POLICIES,
    store,
    scope: { tenant: 'acme', area: 'support', agent: 'recipes' },
  });
  const previous = getGlobalDispatcher();
  const agent = new Agent();
  // No `run` here: each recipe names its runs with the `Effectgate-Run` header, and a run the
  // gate had to derive would show in the trail as `auto-…`.
  const gated: Dispatcher = agent.compose(gateInterceptor(gate));
  setGlobalDispatcher(gated);
  return {
    tracker,
    store,
    gate,
    issues: (repo) => tracker.issues(`/repos/${repo}/issues`),
    decisionsOf: (run) => store.listDecisions({ runId: run }),
    async close() {
      setGlobalDispatcher(previous);
      await agent.close();
      await gate.close();
      await tracker.close();
      await store.close();
    },
  };
}
