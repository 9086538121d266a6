/**
 * The agent framework recipes (docs/recipes.md) through the real `effectgate proxy` binary: the
 * same tools as in process (test/integration/recipes/), the agent process's fetch sent to the proxy
 * by `HTTP_PROXY` and undici's `EnvHttpProxyAgent`, each framework's own tool loop over a scripted
 * model. One proxy and one sidecar scope serve every run here, all from the same address: only the
 * `Effectgate-Run` each tool sends tells the runs apart (without it they would share the run the
 * proxy derives from that address). For each framework, two runs propose the same issue: the
 * tracker has one, the second run's model reads the duplicate verdict naming the first run, and the
 * trail (the admin API) names both runs.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Dispatcher, EnvHttpProxyAgent, getGlobalDispatcher, setGlobalDispatcher } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminCall } from '../helpers/admin-call.js';
import { type IssueTracker, startIssueTracker } from '../helpers/issue-tracker.js';
import { type ProxyProcess, startProxyProcess } from '../helpers/proxy-process.js';
import { openTestStore, storeTargets, type TestStore } from '../helpers/store.js';
import { runAgent as runAiSdk } from '../integration/recipes/ai-sdk-recipe.js';
import { runThread as runLangGraph } from '../integration/recipes/langgraph-recipe.js';
import { runAgent as runOpenAiAgents } from '../integration/recipes/openai-agents-recipe.js';

const POLICIES = new URL('../fixtures/e2e-policies/', import.meta.url).pathname;
const TOKEN = 'eg-agent-recipes-7c41d0e9';
const PROXY_VARIABLES = ['http_proxy', 'HTTP_PROXY', 'https_proxy', 'HTTPS_PROXY', 'no_proxy', 'NO_PROXY'];

/** Each framework's run: resolves with the tool result its model read. */
const FRAMEWORKS: readonly {
  readonly name: string;
  readonly run: (tracker: string, runId: string, title: string) => Promise<string>;
}[] = [
  { name: 'openai-agents', run: runOpenAiAgents },
  { name: 'langgraph', run: runLangGraph },
  { name: 'ai-sdk', run: runAiSdk },
];

interface RunView {
  readonly run_id: string;
  readonly decisions: { readonly verdict: string; readonly toolId: string; readonly operationId: string }[];
}

for (const target of storeTargets()) {
  describe(`agent framework recipes through the proxy (${target.name})`, () => {
    let tracker: IssueTracker;
    let proxy: ProxyProcess;
    let pgStore: TestStore | null = null;
    let dir: string;
    let previous: Dispatcher;
    const saved = new Map<string, string | undefined>();

    beforeAll(async () => {
      tracker = await startIssueTracker();
      dir = mkdtempSync(join(tmpdir(), 'effectgate-recipes-'));
      let store = `pglite:${join(dir, 'store')}`;
      if (target.kind === 'postgres') {
        pgStore = await openTestStore(target);
        store = pgStore.url;
      }
      proxy = await startProxyProcess(
        [
          '--policies',
          POLICIES,
          '--store',
          store,
          '--admin',
          '127.0.0.1:0',
          '--tenant',
          'acme',
          '--area',
          'support',
          '--agent',
          'recipes',
          // undici tunnels http:// through CONNECT; the tracker's port is not one a tool names.
          '--allow-connect-ports',
          String(tracker.port),
        ],
        { EFFECTGATE_ADMIN_TOKEN: TOKEN },
      );
      // The agent's environment, as a sidecar deployment gives it (docs/recipes.md).
      for (const name of PROXY_VARIABLES) saved.set(name, process.env[name]);
      process.env['HTTP_PROXY'] = process.env['http_proxy'] = proxy.url;
      process.env['HTTPS_PROXY'] = process.env['https_proxy'] = proxy.url;
      process.env['NO_PROXY'] = process.env['no_proxy'] = '';
      previous = getGlobalDispatcher();
      // recipe: through-proxy
      // Node 20's fetch does not read HTTP_PROXY; undici's EnvHttpProxyAgent does.
      setGlobalDispatcher(new EnvHttpProxyAgent());
      // end recipe
    });

    afterAll(async () => {
      const agent = getGlobalDispatcher();
      if (previous !== undefined) {
        setGlobalDispatcher(previous);
        if (agent !== previous) await agent.close();
      }
      for (const [name, value] of saved) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
      await proxy?.stop();
      await tracker?.close();
      await pgStore?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    const runView = async (run: string): Promise<RunView> => {
      const reply = await adminCall(Number(new URL(proxy.adminUrl!).port), TOKEN, 'GET', `/api/runs/${run}`);
      expect(reply.status, reply.text).toBe(200);
      return JSON.parse(reply.text) as RunView;
    };

    for (const framework of FRAMEWORKS) {
      it(`${framework.name}: one issue, the second run told it is done and by which run, both runs named in the trail`, async () => {
        const title = `Disk full on db-1 (${framework.name} through the proxy)`;
        const [firstRun, secondRun] = [`${framework.name}-proxy-1`, `${framework.name}-proxy-2`];

        const first = JSON.parse(await framework.run(tracker.url, firstRun, title));
        expect(first).toMatchObject({ status: 201, body: { title } });
        const second = JSON.parse(await framework.run(tracker.url, secondRun, title));
        expect(second).toMatchObject({
          status: 409,
          body: { verdict: 'duplicate', source: { run_id: firstRun } },
        });
        expect(second.body.detail).toContain(`was already carried out by run ${firstRun}`);

        expect(tracker.issues('/repos/acme/api/issues').filter((i) => i.title === title)).toHaveLength(1);
        const allowed = await runView(firstRun);
        const skipped = await runView(secondRun);
        expect(allowed.decisions).toEqual([
          expect.objectContaining({ verdict: 'allow', toolId: 'test.create_issue' }),
        ]);
        expect(skipped.decisions).toEqual([
          expect.objectContaining({ verdict: 'duplicate', operationId: allowed.decisions[0]!.operationId }),
        ]);
      });
    }
  });
}
